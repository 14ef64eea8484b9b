#!/bin/bash
# Writes this lab node's control-plane static pods into DIR (the agent's --pod-manifest-path):
# store, apiserver, scheduler and controller-manager, each `hostNetwork: true` in kube-system
# (so their mirror pods show up in `kubectl get pods -n kube-system -o wide`), running the
# localhost/kubelab:dev image the node agent imports from /opt/kubelab/images. Each runs as
# kubeadm's static pods run: on the cluster's PKI and kubeconfigs in /etc/kubernetes/pki (the
# directory `lab up` made, mounted read-only), every port on TLS.
# Environment: as node-entrypoint.sh (KUBELAB_NODE, KUBELAB_NODE_IP, KUBELAB_STORE_CLUSTER,
# KUBELAB_ETCD_SERVERS).
set -euo pipefail
dir=${1:?usage: $0 DIR}
node=${KUBELAB_NODE:?} ip=${KUBELAB_NODE_IP:?}
cluster=${KUBELAB_STORE_CLUSTER:?} etcd=${KUBELAB_ETCD_SERVERS:?}
mkdir -p "$dir"

# pod NAME ARGS_YAML [VOLUMES_YAML MOUNTS_YAML]: one static pod running /kubelab ARGS, with
# /etc/kubernetes (the PKI, kubeconfigs, encryption and audit configuration) mounted read-only.
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
    volumeMounts:
    - {name: k8s, mountPath: /etc/kubernetes, readOnly: true}
$mounts
  volumes:
  - {name: k8s, hostPath: {path: /etc/kubernetes, type: Directory}}
$volumes
YAML
  # Rename, so the agent's file source never reads half a manifest.
  mv -f "$dir/$name.yaml.tmp" "$dir/$name.yaml"
}
args() { printf '    - "%s"\n' "$@"; }
pki=/etc/kubernetes/pki

# The store: one member per node, as kubeadm's stacked etcd: client and peer ports on TLS with
# client-certificate authentication, on the etcd CA's certificates. Its data directory is on the
# node's store volume (/var/lib/kubelab-store), so it outlives the node container's restarts.
# The cluster token is kubelab-lab, or the one `lab restore` made the restored cluster with (kept
# on the volume beside the data): a member's id comes from its name and the token, and it
# refuses a data directory recorded under another id.
token=$(cat /var/lib/kubelab-store/initial-cluster-token 2>/dev/null || true)
pod store "$(args store --name "$node" --data-dir "/var/lib/kubelab-store/$node" \
  --listen-client-urls "https://$ip:2379,https://127.0.0.1:2379" --advertise-client-urls "https://$ip:2379" \
  --listen-peer-urls "https://$ip:2380" --initial-advertise-peer-urls "https://$ip:2380" \
  --initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "${token:-kubelab-lab}" \
  --cert-file $pki/etcd/server.crt --key-file $pki/etcd/server.key --trusted-ca-file $pki/etcd/ca.crt --client-cert-auth \
  --peer-cert-file $pki/etcd/peer.crt --peer-key-file $pki/etcd/peer.key --peer-trusted-ca-file $pki/etcd/ca.crt --peer-client-cert-auth)" \
  "  - {name: data, hostPath: {path: /var/lib/kubelab-store, type: DirectoryOrCreate}}" \
  "    - {name: data, mountPath: /var/lib/kubelab-store}"

# The API server, with kubeadm's flags: HTTPS on 6443 on every address (no plain port), clients
# authenticated by certificate, service account token or bootstrap token and authorized by
# Node,RBAC; the store reached with the etcd CA's client certificate; node agents called with
# its kubelet client certificate and checked against the cluster CA; secrets encrypted with the
# lab's key; every request not the components' own in the audit log (/var/log/kubernetes/audit.log
# on the node: `lab logs NODE audit`).
# --advertise-address: the default/kubernetes Service's endpoint for this server (pods reach the
# API through it, as the cluster DNS's do).
# Pods tolerate a not-ready or unreachable node for 30 s instead of Kubernetes' 300 s, so that
# the lab's exercises see a dead node's pods replaced within a minute and a half (exercise 07).
pod apiserver "$(args apiserver --etcd-servers "$etcd" \
  --etcd-cafile $pki/etcd/ca.crt --etcd-certfile $pki/apiserver-etcd-client.crt --etcd-keyfile $pki/apiserver-etcd-client.key \
  --bind-address 0.0.0.0 --secure-port 6443 --advertise-address "$ip" \
  --tls-cert-file $pki/apiserver.crt --tls-private-key-file $pki/apiserver.key --client-ca-file $pki/ca.crt \
  --kubelet-client-certificate $pki/apiserver-kubelet-client.crt --kubelet-client-key $pki/apiserver-kubelet-client.key \
  --kubelet-certificate-authority $pki/ca.crt \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-signing-key-file $pki/sa.key --service-account-key-file $pki/sa.pub \
  --enable-bootstrap-token-auth --authorization-mode Node,RBAC \
  --encryption-provider-config /etc/kubernetes/encryption-config.yaml \
  --audit-policy-file /etc/kubernetes/audit-policy.yaml --audit-log-path /var/log/kubernetes/audit.log \
  --default-not-ready-toleration-seconds 30 --default-unreachable-toleration-seconds 30)" \
  "  - {name: audit, hostPath: {path: /var/log/kubernetes, type: DirectoryOrCreate}}" \
  "    - {name: audit, mountPath: /var/log/kubernetes}"

# The scheduler and the controller manager as their own users (scheduler.conf,
# controller-manager.conf: each to its node's API server at https://127.0.0.1:6443).
pod scheduler "$(args scheduler --kubeconfig $pki/scheduler.conf --leader-elect)"

# Three controller managers elect one leader. Each controller runs as its own service account
# (kube-system/<controller>), the CSR signer signs with the cluster CA, and the token cleaner
# runs: kubeadm's flags. A silent node is marked after 30 s (Kubernetes: 40 s; node agents renew
# their Lease every 10 s), so a dead node's pods are replaced within the toleration above plus a
# minute even when the leading controller manager died with the node.
pod controller-manager "$(args controller-manager --kubeconfig $pki/controller-manager.conf --leader-elect \
  --use-service-account-credentials --root-ca-file $pki/ca.crt --controllers '*,bootstrapsigner,tokencleaner' \
  --cluster-signing-cert-file $pki/ca.crt --cluster-signing-key-file $pki/ca.key \
  --node-monitor-grace-period 30s)"
