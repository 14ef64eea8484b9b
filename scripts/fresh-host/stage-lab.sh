#!/usr/bin/env bash
# Guest side of the lab check on a fresh machine: the Docker Compose lab, one node, on a fresh
# Debian 12 whose only cgroup hierarchy is v2 (most users' machines). Run from a clean checkout
# after `make deps` (docker.io, docker-compose), with the artifacts prepare-lab.sh wrote on the
# host (the node image, kubectl).
#
# Usage: scripts/fresh-host/stage-lab.sh ARTIFACTS_DIR
#
# Steps (deploy/lab/lab does the work; docs/architecture/lab.md says what a v2 node does):
#   1. the Docker engine: the one that runs, else containerd + dockerd started by `lab` (their
#      PIDs in $KUBELAB_LAB_DIR/engine; `lab down` stops them again); `docker load` the node image
#   2. LAB_NODES=1 lab up: node1 alone, a one-member store, until the node is Ready
#   3. the node container's cgroups: its cgroup namespace mode, cgroup2fs, the /init leaf, the
#      controllers handed down
#   4. a busybox pod with limits (cpu 250m, memory 64Mi) Running, and its container's cgroup in
#      the node carrying them: cpu.max "25000 100000", memory.max 67108864 (on a v1 host:
#      cpu.cfs_quota_us 25000, memory.limit_in_bytes 67108864)
#   5. lab down -v; prints `fresh-host: lab: ok (<s> s)`
#
# Environment: KUBELAB_LAB_DIR (default: a new directory under /var/tmp), LAB_READY_TIMEOUT
# (default 1800 s), LAB_POD_TIMEOUT (default 900 s), LAB_REQUEST_TIMEOUT (default 60s): an
# emulated guest is tens of times slower than the host.
set -euo pipefail
export LC_ALL=C

art=$(cd "${1:?usage: $0 ARTIFACTS_DIR}" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lab=$repo/deploy/lab/lab
export KUBELAB_LAB_DIR=${KUBELAB_LAB_DIR:-$(mktemp -d /var/tmp/kubelab-lab.XXXXXX)}
export LAB_READY_TIMEOUT=${LAB_READY_TIMEOUT:-1800} LAB_REQUEST_TIMEOUT=${LAB_REQUEST_TIMEOUT:-60s}
pod_timeout=${LAB_POD_TIMEOUT:-900}
[ -z "${KUBECTL_BIN:-}" ] && [ -x "$art/kubectl" ] && export KUBECTL_BIN=$art/kubectl
pod=fresh-host-limits
start=$SECONDS

say() { echo "fresh-host: lab: $*" >&2; }
die() { echo "fresh-host: lab: error: $*" >&2; exit 1; }
node() { docker exec kubelab-node1 "$@"; }

# On any failure: what the node saw, then the lab and the engine it started go away.
finish() {
  local rc=$?
  set +e
  if [ $rc != 0 ] && docker inspect kubelab-node1 >/dev/null 2>&1; then
    say "failed (rc $rc); the node's last words:"
    docker logs --tail 40 kubelab-node1 2>&1 | sed 's/^/  node1: /' >&2
    node tail -n 20 /var/log/containerd.log 2>&1 | sed 's/^/  containerd: /' >&2
    "$lab" kubectl get pods -A -o wide 2>&1 | sed 's/^/  /' >&2
  fi
  "$lab" down -v >/dev/null 2>&1 || say "lab down -v failed"
  exit $rc
}
trap finish EXIT

# 1. The engine and the node image.
tag=$("$lab" load "$art")
say "node image $tag loaded ($((SECONDS - start)) s)"

# 2. One node.
t=$SECONDS
LAB_NODES=1 KUBELAB_NODE_IMAGE=$tag "$lab" up >/dev/null
say "node1 Ready $((SECONDS - t)) s after lab up"

# 3. The node's cgroups, as the entrypoint left them.
fs=$(node stat -fc %T /sys/fs/cgroup)
say "docker: cgroup driver $(docker info -f '{{.CgroupDriver}}'), cgroup v$(docker info -f '{{.CgroupVersion}}'); node1: CgroupnsMode '$(docker inspect -f '{{.HostConfig.CgroupnsMode}}' kubelab-node1)', /sys/fs/cgroup is $fs"
if [ "$fs" = cgroup2fs ]; then
  say "node1: $(node cat /proc/1/cgroup) for its PID 1, $(node cat /sys/fs/cgroup/init/cgroup.procs | wc -l) processes in /init, $(node cat /sys/fs/cgroup/cgroup.procs | wc -l) in the root; subtree_control: $(node cat /sys/fs/cgroup/cgroup.subtree_control)"
  [ -z "$(node cat /sys/fs/cgroup/cgroup.procs)" ] || die "processes left in node1's root cgroup"
fi

# 4. A pod with limits, and those limits in its container's cgroup.
"$lab" kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: $pod
spec:
  containers:
  - name: box
    image: docker.io/library/busybox:1.36
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    resources:
      limits: {cpu: 250m, memory: 64Mi}
YAML
t=$SECONDS phase=""
while [ $((SECONDS - t)) -lt "$pod_timeout" ]; do
  phase=$("$lab" kubectl get pod "$pod" -o 'jsonpath={.status.phase}' 2>/dev/null || true)
  [ "$phase" = Running ] && break
  sleep 2
done
[ "$phase" = Running ] || die "pod $pod not Running after ${pod_timeout}s (phase '$phase')"
say "pod $pod Running $((SECONDS - t)) s after it was created"
id=$("$lab" kubectl get pod "$pod" -o 'jsonpath={.status.containerStatuses[0].containerID}')
id=${id#*://}
[ -n "$id" ] || die "pod $pod has no container ID"

# The container's cgroup directory carries its ID in its name under either driver
# (cgroupfs: <id>, systemd: cri-containerd-<id>.scope).
if [ "$fs" = cgroup2fs ]; then
  dir=$(node find /sys/fs/cgroup -type d -name "*$id*" 2>/dev/null | head -n1 || true)
  [ -n "$dir" ] || die "no cgroup of container $id in node1's /sys/fs/cgroup"
  cpu=$(node cat "$dir/cpu.max") mem=$(node cat "$dir/memory.max")
  say "container $pod/box: cgroup $dir: cpu.max '$cpu', memory.max $mem"
  [ "$cpu" = "25000 100000" ] || die "cpu.max is '$cpu', want '25000 100000' (250m)"
  [ "$mem" = 67108864 ] || die "memory.max is $mem, want 67108864 (64Mi)"
else
  # A node container sees the cpu hierarchy at /sys/fs/cgroup/cpu (Docker mounts each one
  # under its own name), not at the host's cpu,cpuacct.
  dir=$(node find /sys/fs/cgroup/memory/ -type d -name "*$id*" 2>/dev/null | head -n1 || true)
  cdir=$(node find /sys/fs/cgroup/cpu/ -type d -name "*$id*" 2>/dev/null | head -n1 || true)
  [ -n "$dir" ] && [ -n "$cdir" ] || die "no cgroup of container $id in node1's /sys/fs/cgroup"
  cpu=$(node cat "$cdir/cpu.cfs_quota_us") mem=$(node cat "$dir/memory.limit_in_bytes")
  say "container $pod/box: cgroup $cdir: cpu.cfs_quota_us $cpu; $dir: memory.limit_in_bytes $mem"
  [ "$cpu" = 25000 ] || die "cpu.cfs_quota_us is $cpu, want 25000 (250m)"
  [ "$mem" = 67108864 ] || die "memory.limit_in_bytes is $mem, want 67108864 (64Mi)"
fi

# 5. Down (the trap), and the verdict.
trap - EXIT
t=$SECONDS
"$lab" down -v >/dev/null
say "lab down -v in $((SECONDS - t)) s"
echo "fresh-host: lab: ok ($((SECONDS - start)) s)"
