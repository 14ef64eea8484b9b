#!/bin/bash
# Writes this lab node's control-plane static pods into DIR (the agent's --pod-manifest-path):
# store, apiserver, scheduler and controller-manager, each `hostNetwork: true` in kube-system
# (so their mirror pods show up in `kubectl get pods -n kube-system -o wide`), running the
# localhost/kubelab:dev image the node agent imports from /opt/kubelab/images.
# Environment: as node-entrypoint.sh (KUBELAB_NODE, KUBELAB_NODE_IP, KUBELAB_STORE_CLUSTER,
# KUBELAB_ETCD_SERVERS).
set -euo pipefail
dir=${1:?usage: $0 DIR}
node=${KUBELAB_NODE:?} ip=${KUBELAB_NODE_IP:?}
cluster=${KUBELAB_STORE_CLUSTER:?} etcd=${KUBELAB_ETCD_SERVERS:?}
mkdir -p "$dir"

# pod NAME ARGS_YAML [VOLUMES_YAML MOUNTS_YAML]: one static pod running /kubelab ARGS.
pod() {
  local name=$1 args=$2 volumes=${3:-} mounts=${4:-}
  cat >"$dir/$name.yaml.tmp" <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: kube-system
  labels: {component: $name, tier: control-plane}
spec:
  hostNetwork: true
  restartPolicy: Always
  containers:
  - name: $name
    image: localhost/kubelab:dev
    imagePullPolicy: Never
    command: ["/kubelab"]
    args:
$args
    env:
    - {name: RUST_LOG, value: "${RUST_LOG:-info}"}
$mounts
$volumes
YAML
  # Rename, so the agent's file source never reads half a manifest.
  mv -f "$dir/$name.yaml.tmp" "$dir/$name.yaml"
}

# The store: one member per node. Its data directory is on the node's store volume
# (/var/lib/kubelab-store), so it outlives the node container's restarts.
pod store "$(printf '    - "%s"\n' store --name "$node" --data-dir "/var/lib/kubelab-store/$node" \
  --listen-client-urls "http://$ip:2379,http://127.0.0.1:2379" --advertise-client-urls "http://$ip:2379" \
  --listen-peer-urls "http://$ip:2380" --initial-advertise-peer-urls "http://$ip:2380" \
  --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token kubelab-lab)" \
  "  volumes:
  - {name: data, hostPath: {path: /var/lib/kubelab-store, type: DirectoryOrCreate}}" \
  "    volumeMounts:
    - {name: data, mountPath: /var/lib/kubelab-store}"

# Pods tolerate a not-ready or unreachable node for 30 s instead of Kubernetes' 300 s, so that
# the lab's exercises see a dead node's pods replaced within a minute and a half (exercise 07).
# --advertise-address: the default/kubernetes Service's endpoint for this server (pods reach the
# API through it, as the cluster DNS's do).
pod apiserver "$(printf '    - "%s"\n' apiserver --etcd-servers "$etcd" --insecure-bind-address 0.0.0.0 --insecure-port 6443 --secure-port 0 --advertise-address "$ip" \
  --default-not-ready-toleration-seconds 30 --default-unreachable-toleration-seconds 30)"

pod scheduler "$(printf '    - "%s"\n' scheduler --master http://127.0.0.1:6443 --leader-elect)"

# Three controller managers elect one leader. A silent node is marked after 30 s (Kubernetes: 40 s;
# node agents renew their Lease every 10 s), so a dead node's pods are replaced within the
# toleration above plus a minute even when the leading controller manager died with the node.
cm_args=(controller-manager --master http://127.0.0.1:6443 --leader-elect --node-monitor-grace-period 30s)
pod controller-manager "$(printf '    - "%s"\n' "${cm_args[@]}")"

