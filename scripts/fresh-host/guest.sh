#!/usr/bin/env bash
# Runs inside the fresh Debian 12 guest (run.sh boots it), from a clean checkout of the
# repository, as root: what a user with a new machine does, stage by stage.
#
#   scripts/fresh-host/guest.sh ARTIFACTS_DIR [LOG_DIR]
#
#   facts   the machine is what users have: only cgroup v2 (cgroup2fs), systemd as PID 1
#   deps    `make deps` on the fresh system, unmodified, as the README tells a user to run it
#   up      the host-built `kubelab up` until its node is Ready
#   checks  with kubectl: pod cgroup limits, OOMKilled, exec and logs, probes, node conditions;
#           then `kubelab up` is stopped
#   e2e     the node agent's end-to-end test binaries (built on the host)
#   lab     scripts/fresh-host/stage-lab.sh ARTIFACTS_DIR, when that script exists
#
# ARTIFACTS_DIR holds kubelab, images/{pause,busybox}.tar and e2e/<test binaries>. Logs of the
# processes a stage starts go to LOG_DIR (default /var/log/fresh-host). FRESH_HOST_STAGES picks
# stages (default all); the stages a picked one needs run too (deps before up, up before checks),
# since every run starts from the pristine image. Each stage prints
# `fresh-host: <stage>: ok (<seconds> s)` or FAILED with the evidence; a failed stage skips the
# stages that need it (facts <- deps <- up, e2e, lab; up <- checks), not the others. A summary
# ends the output; the status is 0 only when every stage run passed.
set -euo pipefail

art=${1:?usage: $0 ARTIFACTS_DIR [LOG_DIR]}
logs=${2:-/var/log/fresh-host}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=/var/lib/kubelab
kubectl=/var/cache/kubelab/kubectl/kubectl.1.33
all_stages=(facts deps up checks e2e lab)
mkdir -p "$logs"

say() { echo "fresh-host: $*"; }
# fail WHAT: the current stage fails with WHAT; the caller has printed the evidence.
fail() { echo "fresh-host: $stage: FAILED: $*"; return 1; }
# tail_of FILE: the evidence, marked.
tail_of() { echo "----- last lines of $1 -----"; tail -n "${2:-40}" "$1" 2>&1 || true; echo "-----"; }

# --- stage selection ------------------------------------------------------------------------------
wanted=" ${FRESH_HOST_STAGES//,/ } "
[ -n "${FRESH_HOST_STAGES:-}" ] || wanted=" ${all_stages[*]} "
for s in $wanted; do
  [[ " ${all_stages[*]} " == *" $s "* ]] || { echo "fresh-host: unknown stage $s (stages: ${all_stages[*]})"; exit 2; }
done
# What a stage needs on a pristine machine.
need() { [[ "$wanted" == *" $1 "* ]] && [[ "$wanted" != *" $2 "* ]] && wanted+="$2 "; return 0; }
need checks up; need up deps; need e2e deps; need lab deps
picked() { [[ "$wanted" == *" $1 "* ]]; }
# needs STAGE: the stages STAGE cannot run without (a failed one skips it; the others still run).
needs() { case $1 in deps) echo facts ;; up | e2e | lab) echo deps ;; checks) echo up ;; esac; }

# --- helpers --------------------------------------------------------------------------------------
# k ARGS: kubectl 1.33 (from make deps) against kubelab up's cluster, with a HOME of its own.
kube_home=$(mktemp -d)
k() { HOME=$kube_home "$kubectl" --kubeconfig "$data/kubeconfig" --request-timeout=60s "$@"; }

# wait_for WHAT SECONDS COMMAND...: runs COMMAND every 2 s until it succeeds; on timeout prints
# what it last said and fails.
wait_for() {
  local what=$1 secs=$2 out; shift 2
  local deadline=$((SECONDS + secs))
  while true; do
    if out=$("$@" 2>&1); then return 0; fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "timed out after ${secs} s waiting for $what; last: $out"
      return 1
    fi
    sleep 2
  done
}

# apply_pod NAME RESTART_POLICY COMMAND: kubectl apply of pod NAME, one busybox container running
# `sh -c COMMAND`, grace period 1 s; the container's further fields are on stdin.
apply_pod() {
  { printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  restartPolicy: %s\n' "$1" "$2"
    printf '  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n'
    printf '    image: docker.io/library/busybox:1.36\n    command: [sh, -c, %s]\n' "'$3'"
    cat; } | k apply -f - || fail "kubectl apply of pod $1 failed"
}

# jp POD JSONPATH: one field of a pod.
jp() { k get pod "$1" -o "jsonpath=$2"; }
# field_is POD JSONPATH WANT / field_set POD JSONPATH / field_at_least POD JSONPATH N: for wait_for.
field_is() { local got; got=$(jp "$1" "$2") || return; [ "$got" = "$3" ] || { echo "$2 is '$got'"; return 1; }; }
field_set() { local got; got=$(jp "$1" "$2") || return; [ -n "$got" ] || { echo "$2 is empty"; return 1; }; }
field_at_least() { local got; got=$(jp "$1" "$2") || return; [ "${got:-0}" -ge "$3" ] || { echo "$2 is '$got'"; return 1; }; }

up_pid=""
stop_up() {
  [ -n "$up_pid" ] || return 0
  kill -TERM "$up_pid" 2>/dev/null || true
  local deadline=$((SECONDS + 300))
  while kill -0 "$up_pid" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "kubelab up (pid $up_pid) did not stop within 300 s of SIGTERM; killing it"
      kill -KILL "$up_pid" 2>/dev/null || true
      wait "$up_pid" 2>/dev/null || true
      up_pid=""
      return 1
    fi
    sleep 1
  done
  local rc=0
  wait "$up_pid" || rc=$?
  up_pid=""
  echo "kubelab up stopped (status $rc)"
  [ "$rc" = 0 ] || { tail_of "$logs/up.log"; return 1; }
}
trap 'stop_up >/dev/null 2>&1 || true; rm -rf "$kube_home"' EXIT

# --- stages ---------------------------------------------------------------------------------------
stage_facts() {
  local fs controllers pid1
  echo "kernel: $(uname -srm); $(. /etc/os-release && echo "$PRETTY_NAME") (debian_version $(cat /etc/debian_version))"
  echo "cpus: $(nproc); memory: $(awk '/MemTotal/ { printf "%d MiB", $2 / 1024 }' /proc/meminfo)"
  echo "cmdline: $(cat /proc/cmdline)"
  fs=$(stat -fc %T /sys/fs/cgroup)
  echo "/sys/fs/cgroup: $fs"
  [ "$fs" = cgroup2fs ] || fail "/sys/fs/cgroup is $fs, not cgroup2fs (only cgroup v2)" || return
  local v1
  v1=$(awk '$3 == "cgroup" { print $2 }' /proc/mounts)
  [ -z "$v1" ] || fail "cgroup v1 hierarchies are mounted: $v1" || return
  pid1=$(readlink /proc/1/exe)
  echo "PID 1: $pid1 ($(cat /proc/1/comm)); $(systemctl --version | head -n1)"
  [ "$(cat /proc/1/comm)" = systemd ] || fail "PID 1 is $(cat /proc/1/comm), not systemd" || return
  controllers=$(cat /sys/fs/cgroup/cgroup.controllers)
  echo "cgroup.controllers: $controllers"
  echo "cgroup.subtree_control: $(cat /sys/fs/cgroup/cgroup.subtree_control)"
  local c
  for c in cpu memory pids; do
    [[ " $controllers " == *" $c "* ]] || fail "the $c controller is not available" || return
  done
  echo "not installed (make deps' job): $(for p in containerd runc containernetworking-plugins iptables docker.io nodejs npm python3; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || printf '%s ' "$p"; done)"
}

stage_deps() {
  # Timestamps on every line: the log then shows where the minutes go.
  local start=$SECONDS rc=0
  (cd "$src" && make deps) 2>&1 | while IFS= read -r line; do printf '[deps %4d s] %s\n' $((SECONDS - start)) "$line"; done \
    | tee "$logs/deps.log" || rc=$?
  [ "$rc" = 0 ] || fail "make deps exited with status $rc" || return
  echo "installed by make deps: $(grep -o 'make deps: installing.*' "$logs/deps.log" | cut -d' ' -f4- | head -n1)"
  echo "$(dpkg-query -W -f='${binary:Package}\n' | wc -l) Debian packages installed in all; $(du -sh /var/cache/kubelab | cut -f1) in /var/cache/kubelab"
  local m
  for m in 27 28 29 30 31 32 33; do
    [ -x "/var/cache/kubelab/kubectl/kubectl.1.$m" ] || fail "no kubectl 1.$m after make deps" || return
  done
  "$kubectl" version --client 2>&1 | head -n1
  /var/cache/kubelab/etcd/usr/bin/etcd --version | head -n1
  containerd --version; runc --version | head -n1
}

stage_up() {
  "$art/kubelab" --version 2>/dev/null || true
  "$art/kubelab" up --data-dir "$data" --image-dir "$art/images" >"$logs/up.log" 2>&1 &
  up_pid=$!
  echo "kubelab up: pid $up_pid, data dir $data, log $logs/up.log"
  local deadline=$((SECONDS + 900))
  # kubelab up writes the kubeconfig once its node is Ready.
  until [ -f "$data/kubeconfig" ]; do
    if ! kill -0 "$up_pid" 2>/dev/null; then
      local rc=0; wait "$up_pid" || rc=$?; up_pid=""
      tail_of "$logs/up.log"
      fail "kubelab up exited with status $rc before its node was Ready" || return
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail_of "$logs/up.log"
      fail "no node Ready within 900 s" || return
    fi
    sleep 2
  done
  cat "$logs/up.log"
  local ready
  ready=$(k get nodes -o 'jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  echo "nodes: $ready"
  [[ "$ready" == *=True* ]] || fail "kubectl sees no Ready node: $ready" || return
}

# find_pod_cgroup UID: the pod's cgroup directory, in the systemd driver's form
# (kubepods-<qos>-pod<uid with _>.slice) or cgroupfs's (pod<uid>).
find_pod_cgroup() {
  local uid=$1
  find /sys/fs/cgroup -type d \( -name "pod$uid" -o -name "*-pod${uid//-/_}.slice" \) 2>/dev/null | head -n1
}

# check_file DIR FILE WANT: one cgroup file holds WANT.
check_file() {
  local got
  got=$(cat "$1/$2" 2>&1) || true
  echo "  $2 = $got (want $3)"
  [ "$got" = "$3" ] || fail "$1/$2 is '$got', want '$3'"
}

check_limits() {
  say "checks (1): a Burstable pod's cgroup holds its cpu and memory limits"
  apply_pod limits Always 'echo limits pod started; exec sleep 3600' <<'YAML' || return
    resources:
      requests: {cpu: 100m, memory: 32Mi}
      limits: {cpu: 500m, memory: 64Mi}
YAML
  wait_for "pod limits Running" 600 field_is limits '{.status.phase}' Running \
    || { k describe pod limits; fail "pod limits is not Running"; } || return
  local uid qos dir
  uid=$(jp limits '{.metadata.uid}'); qos=$(jp limits '{.status.qosClass}')
  echo "  pod limits: uid $uid, qosClass $qos"
  [ "$qos" = Burstable ] || fail "qosClass $qos, want Burstable" || return
  dir=$(find_pod_cgroup "$uid")
  [ -n "$dir" ] || { find /sys/fs/cgroup -maxdepth 4 -type d | grep -i -e kube -e pod | head -n 40
                     fail "no cgroup for pod $uid under /sys/fs/cgroup"; } || return
  echo "  pod cgroup: $dir"
  # Pod cgroup = the sum of its containers: limit 500m -> 50 ms of every 100 ms period; request
  # 100m -> cpu.shares 102 -> cpu.weight 1 + (102 - 2) * 9999 / 262142 = 4 (kubelet's conversion).
  check_file "$dir" cpu.max "50000 100000" || return
  check_file "$dir" memory.max $((64 * 1024 * 1024)) || return
  check_file "$dir" cpu.weight $((1 + (102 - 2) * 9999 / 262142)) || return
}

check_oom() {
  say "checks (2): a container that allocates past its memory limit is OOMKilled"
  apply_pod oom Never 'x=a; while true; do x=$x$x; done' <<'YAML' || return
    resources:
      limits: {cpu: 500m, memory: 32Mi}
YAML
  wait_for "pod oom terminated" 600 field_set oom '{.status.containerStatuses[0].state.terminated.reason}' \
    || { k describe pod oom; fail "the container of pod oom did not terminate"; } || return
  local reason code
  reason=$(jp oom '{.status.containerStatuses[0].state.terminated.reason}')
  code=$(jp oom '{.status.containerStatuses[0].state.terminated.exitCode}')
  echo "  pod oom: terminated, reason $reason, exit code $code, phase $(jp oom '{.status.phase}')"
  [ "$reason" = OOMKilled ] || { k describe pod oom; fail "terminated with reason $reason, want OOMKilled"; }
}

check_exec_logs() {
  say "checks (3): kubectl exec and kubectl logs"
  local out
  out=$(k exec limits -- sh -c 'echo exec in $(hostname)' 2>&1) || fail "kubectl exec failed: $out" || return
  echo "  exec: $out"
  [ "$out" = "exec in limits" ] || fail "kubectl exec printed '$out'" || return
  # On cgroup v2 a container has a cgroup namespace of its own: its /sys/fs/cgroup is its own
  # cgroup, holding the container's limit.
  out=$(k exec limits -- cat /sys/fs/cgroup/memory.max 2>&1) \
    || fail "the container cannot read its own memory.max (no cgroup namespace?): $out" || return
  echo "  the container's /sys/fs/cgroup/memory.max: $out"
  [ "$out" = $((64 * 1024 * 1024)) ] || fail "the container's memory.max is '$out', want 64Mi" || return
  out=$(k logs limits 2>&1) || fail "kubectl logs failed: $out" || return
  echo "  logs: $out"
  [ "$out" = "limits pod started" ] || fail "kubectl logs printed '$out'"
}

check_probes() {
  say "checks (4): exec liveness and readiness probes"
  apply_pod probes Always 'touch /tmp/healthy /tmp/ready; exec sleep 3600' <<'YAML' || return
    livenessProbe:
      exec: {command: [cat, /tmp/healthy]}
      periodSeconds: 3
      failureThreshold: 2
      timeoutSeconds: 10
    readinessProbe:
      exec: {command: [cat, /tmp/ready]}
      periodSeconds: 3
      timeoutSeconds: 10
YAML
  local ready='{.status.conditions[?(@.type=="Ready")].status}'
  wait_for "pod probes Ready" 600 field_is probes "$ready" True || { k describe pod probes; fail "pod probes never Ready"; } || return
  echo "  pod probes: Ready, restartCount $(jp probes '{.status.containerStatuses[0].restartCount}')"
  k exec probes -- rm /tmp/healthy || fail "kubectl exec probes -- rm /tmp/healthy failed" || return
  echo "  removed /tmp/healthy: the liveness probe now fails"
  wait_for "pod probes restarted" 600 field_at_least probes '{.status.containerStatuses[0].restartCount}' 1 \
    || { k describe pod probes; fail "a failing liveness probe did not restart the container"; } || return
  wait_for "pod probes Ready again" 600 field_is probes "$ready" True || { k describe pod probes; fail "pod probes not Ready after its restart"; } || return
  echo "  pod probes: restarted (restartCount $(jp probes '{.status.containerStatuses[0].restartCount}')) and Ready again"
  k get events --field-selector involvedObject.name=probes 2>/dev/null | grep -i -e unhealthy -e killing | tail -n 3 || true
}

check_node_conditions() {
  say "checks (5): eviction signals on the Node"
  local node c want got
  node=$(k get nodes -o 'jsonpath={.items[0].metadata.name}')
  for c in MemoryPressure:KubeletHasSufficientMemory DiskPressure:KubeletHasNoDiskPressure PIDPressure:KubeletHasSufficientPID; do
    want=${c#*:}; c=${c%%:*}
    got=$(k get node "$node" -o "jsonpath={.status.conditions[?(@.type==\"$c\")].status} {.status.conditions[?(@.type==\"$c\")].reason}")
    echo "  $c: $got"
    [ "$got" = "False $want" ] || fail "node $node: $c is '$got', want 'False $want'" || return
  done
}

stage_checks() {
  local rc=0
  check_limits && check_oom && check_exec_logs && check_probes && check_node_conditions || rc=$?
  k get pods -o wide || true
  if [ "$rc" != 0 ]; then tail_of "$logs/up.log" 60; fi
  stop_up || rc=1
  return "$rc"
}

# How much slower than a development host this machine runs the tests: FRESH_HOST_SLOWDOWN when
# given, else 10 under emulation (qemu without KVM: CPU work 10-50x slower; a kubectl run takes
# seconds), else 1.
e2e_slowdown() {
  if [ -n "${FRESH_HOST_SLOWDOWN:-}" ]; then echo "$FRESH_HOST_SLOWDOWN"
  elif [ "$(systemd-detect-virt 2>/dev/null)" = qemu ]; then echo 10
  else echo 1
  fi
}

stage_e2e() {
  stop_up || return
  local t rc failed=()
  for t in "$art"/e2e/*; do
    rc=0
    say "e2e: $(basename "$t")"
    # One test at a time: the emulated machine has 2 slow CPUs. The harness's deadlines were
    # measured on the development hosts: E2E_SLOWDOWN stretches them (e2e::scaled).
    env KUBELAB_BIN="$art/kubelab" KUBELAB_IMAGES="$art/images" E2E_KEEP_DIRS= \
      E2E_SLOWDOWN="$(e2e_slowdown)" \
      "$t" --test-threads=1 2>&1 | tee "$logs/e2e-$(basename "$t").log" || rc=$?
    [ "$rc" = 0 ] || failed+=("$(basename "$t")")
  done
  [ ${#failed[@]} = 0 ] || fail "e2e binaries failing: ${failed[*]}"
}

stage_lab() {
  if [ ! -e "$src/scripts/fresh-host/stage-lab.sh" ]; then
    echo "no scripts/fresh-host/stage-lab.sh in this checkout: nothing to do"
    return 0
  fi
  stop_up || return
  "$src/scripts/fresh-host/stage-lab.sh" "$art"
}

# --- run ------------------------------------------------------------------------------------------
summary=()
status=0
failed=" "
for stage in "${all_stages[@]}"; do
  picked "$stage" || continue
  need=$(needs "$stage")
  if [ -n "$need" ] && [[ "$failed" == *" $need "* ]]; then
    say "$stage: skipped ($need failed)"
    summary+=("$(printf '%-7s skipped (%s failed)' "$stage" "$need")")
    failed+="$stage "
    continue
  fi
  say "$stage: start ($(date -u +%H:%M:%S) UTC)"
  t0=$SECONDS
  rc=0
  "stage_$stage" || rc=$?
  secs=$((SECONDS - t0))
  if [ "$rc" = 0 ]; then
    say "$stage: ok ($secs s)"
    summary+=("$(printf '%-7s ok      %5d s' "$stage" "$secs")")
  else
    say "$stage: FAILED ($secs s)"
    summary+=("$(printf '%-7s FAILED  %5d s' "$stage" "$secs")")
    status=1
    failed+="$stage "
  fi
done
stop_up || true
echo
say "summary (kernel $(uname -r), $(stat -fc %T /sys/fs/cgroup), $(nproc) CPUs)"
for line in "${summary[@]}"; do echo "  $line"; done
exit "$status"
