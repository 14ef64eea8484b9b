#!/bin/bash
# The entrypoint of a lab node container (kubelab-node image): make the container able to run
# containers itself, start containerd, write this node's control-plane static pods, then become
# `kubelab nodeagent`. Configured by the environment deploy/lab/docker-compose.yml sets:
#   KUBELAB_NODE           node1              KUBELAB_NODE_IP     172.31.250.11
#   KUBELAB_POD_CIDR       10.244.1.0/24      KUBELAB_ETCD_SERVERS  the API server's --etcd-servers
#   KUBELAB_STORE_CLUSTER  name=peer-url,…  (the store's --initial-cluster)
#   KUBELAB_ROLE           control-plane (default): /etc/kubernetes holds the cluster's PKI and
#                          kubeconfigs (kubeadm init's); the node runs the control plane and its
#                          agent is system:node:<node> from pki/kubelet-<node>.conf.
#                          worker: /etc/kubernetes holds what `lab join` gave it (kubeadm join's):
#                          the CA, this kubelet's serving certificate, a bootstrap kubeconfig and
#                          the proxy's kubeconfig; the agent gets its client certificate through
#                          TLS bootstrap.
# Each step is one that a node container needs before containerd can run containers inside it
# (docs/architecture/lab.md).
set -euo pipefail

node=${KUBELAB_NODE:?} ip=${KUBELAB_NODE_IP:?} cidr=${KUBELAB_POD_CIDR:?} role=${KUBELAB_ROLE:-control-plane}
log() { echo "[entrypoint $node] $*" >&2; }

# 1. Mounts. Docker mounts /sys and /proc/sys read-only and the root private; the node agent
#    and containerd need them writable (sysctls, cgroups) and mounts to propagate into pods.
mount --make-rshared /
mount -o remount,rw /sys
mount -o remount,bind,rw /proc/sys

# 2. Cgroups, as the host has them: v1 (one hierarchy per controller) or v2 (one unified tree).
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  # cgroup v2. Docker 20.10+ gives a container its own cgroup namespace on a v2 host, so this
  # container's cgroup is the root of the tree it sees; in the host's namespace the agent would
  # be creating cgroups among the host's own, which it must not.
  read -r own </proc/self/cgroup
  if [ "$own" != "0::/" ]; then
    log "this container is in the host's cgroup namespace ($own); the node needs its own:"
    log "run dockerd with --default-cgroupns-mode=private (the default on a cgroup v2 host)"
    exit 1
  fi
  # Docker mounts the tree read-only; the bind form is for an engine that bind-mounts it (as
  # v1's controllers are, where plain `remount,rw` fails with "mount point is busy").
  mount -o remount,rw /sys/fs/cgroup 2>/dev/null || mount -o remount,bind,rw /sys/fs/cgroup
  # cgroup v2's "no internal processes" rule: a cgroup with processes of its own cannot hand
  # controllers to its children (writing cgroup.subtree_control fails with EBUSY). Every
  # process here (docker-init, this shell) is in the root, so they move to a leaf, /init, and
  # everything started below (containerd, the agent) is born there. The loop repeats because a
  # process forked while the list was read lands in the root too.
  mkdir -p /sys/fs/cgroup/init
  for _ in 1 2 3 4 5; do
    moved=0
    while read -r pid; do
      # a process that exited since the list was read (ESRCH) needs no move
      echo "$pid" >/sys/fs/cgroup/init/cgroup.procs 2>/dev/null && moved=$((moved + 1)) || true
    done </sys/fs/cgroup/cgroup.procs
    [ "$moved" = 0 ] && break
  done
  # Then hand every controller the container got to the children, so the agent can set cpu,
  # memory and pids limits (cpu.max, memory.max, pids.max) on the pod cgroups it creates. One
  # at a time: a single write of all of them fails as a whole if one is refused.
  controllers=()
  read -r -a controllers </sys/fs/cgroup/cgroup.controllers || true
  for c in "${controllers[@]}"; do
    echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || log "cgroup v2: cannot enable controller $c"
  done
  log "cgroup v2: processes moved to /init, controllers enabled: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
else
  # cgroup v1. Each controller is a bind mount of the container's own cgroup: plain
  # `remount,rw` fails with "mount point is busy".
  for d in /sys/fs/cgroup/*/; do
    d=${d%/}
    [ -L "$d" ] && continue
    mountpoint -q "$d" && mount -o remount,bind,rw "$d" 2>/dev/null || true
  done
  mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true
fi
# 3. Packets between pods leave through this node.
echo 1 >/proc/sys/net/ipv4/ip_forward

# 4. containerd: this node's only one, so a machine's layout, printed by `kubelab
#    containerd-config` (the code that writes `kubelab up`'s config too): root /var/lib/containerd
#    (a volume: overlayfs on the container's own overlay root fails); state and socket under
#    /run/containerd, on tmpfs (a restarted node starts with no running tasks, as a rebooted
#    machine would); CNI configs in /etc/cni/net.d, the node agent's default --cni-conf-dir.
mkdir -p /etc/containerd /etc/cni/net.d /var/log /opt/cni
[ -e /opt/cni/bin ] || ln -s /usr/lib/cni /opt/cni/bin
/usr/local/bin/kubelab containerd-config >/etc/containerd/config.toml
# The lab's registry (`registry:5000`, docker-compose.yml) serves a certificate of the cluster CA:
# containerd's registry hosts entry names that CA (containerd's certs.d, read at every pull).
mkdir -p /etc/containerd/certs.d/registry:5000
/usr/local/bin/kubelab containerd-config --registry-host registry:5000 --registry-ca /etc/kubernetes/pki/ca.crt \
  >/etc/containerd/certs.d/registry:5000/hosts.toml
log "starting containerd (log: /var/log/containerd.log)"
containerd --config /etc/containerd/config.toml >>/var/log/containerd.log 2>&1 &
for _ in $(seq 1 300); do
  [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && break
  sleep 0.1
done
ctr version >/dev/null 2>&1 || { log "containerd did not come up"; tail -n 30 /var/log/containerd.log >&2; exit 1; }

# 5. The control plane as static pods (on a control-plane node). The store keeps its data on
#    the node's store volume: a restarted node finds its own member's data there and resumes it
#    (the store refuses a data dir written by another member or cluster, and
#    `--initial-cluster-state new` is only acted on when the directory is empty).
pki=/etc/kubernetes/pki
case $role in
  control-plane)
    /opt/kubelab/write-manifests.sh /etc/kubelab/manifests
    # Each component to this node's own API server, with its own identity.
    proxy_kubeconfig=$pki/proxy.conf
    credentials=(--kubeconfig "$pki/kubelet-$node.conf")
    ;;
  worker)
    # kubeadm join's files: the agent starts from the bootstrap token and keeps the client
    # certificate it is issued (and the kubeconfig naming it) in its own directory.
    mkdir -p /etc/kubelab/manifests
    proxy_kubeconfig=/etc/kubernetes/proxy.conf
    credentials=(--bootstrap-kubeconfig /etc/kubernetes/bootstrap-kubelet.conf --kubeconfig /var/lib/kubelab/kubelet.conf)
    ;;
  *) log "KUBELAB_ROLE must be control-plane or worker (got '$role')"; exit 1 ;;
esac

# 6. The node agent, as this container's main process (tini forwards SIGTERM to it).
# As kind's nodes: the three nodes share the host's disk and their images come from tarballs
# (no registry to pull them again), so disk pressure and image GC are off; memory still evicts.
# kube-proxy, as a process of the node (its iptables rules are the node container's): restarted
# if it stops; it waits for the API server the agent's static pods bring up. It is
# system:kube-proxy (proxy.conf), which the default policy makes a system:node-proxier.
log "starting kubelab proxy (log: /var/log/kubelab-proxy.log)"
(
  while true; do
    /usr/local/bin/kubelab proxy --kubeconfig "$proxy_kubeconfig" --hostname-override "$node" \
      --cluster-cidr 10.244.0.0/16 --service-cluster-ip-range 10.96.0.0/12 >>/var/log/kubelab-proxy.log 2>&1 || true
    sleep 1
  done
) &

# The agent's API on :10250 as kubeadm's KubeletConfiguration sets it: HTTPS with its serving
# certificate of the cluster CA, callers authenticated by client certificate or TokenReview (no
# anonymous) and authorized by a SubjectAccessReview on nodes/<subresource>.
log "starting kubelab nodeagent ($role)"
exec /usr/local/bin/kubelab nodeagent \
  "${credentials[@]}" \
  --node-name "$node" --node-ip "$ip" --pod-cidr "$cidr" \
  --cluster-dns 10.96.0.10 \
  --pod-manifest-path /etc/kubelab/manifests \
  --image-dir /opt/kubelab/images \
  --tls-cert-file "$pki/kubelet-$node.crt" --tls-private-key-file "$pki/kubelet-$node.key" \
  --client-ca-file "$pki/ca.crt" --anonymous-auth=false --authentication-token-webhook \
  --authorization-mode Webhook \
  --eviction-hard 'memory.available<100Mi,nodefs.available<0%,nodefs.inodesFree<0%,imagefs.available<0%' \
  --image-gc-high-threshold 100 \
  --host-gw
