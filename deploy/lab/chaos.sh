#!/usr/bin/env bash
# `lab chaos [--duration D] [--seed N]`: a soak of the running lab, in the spirit of Jepsen's
# nemesis and etcd's robustness runs, at the scale of whole nodes. For D (default 30m; `90s`,
# `10m`, `1h`), with the seed N (default: the time) choosing what happens:
#
#  1. Set up, in the namespace `chaos`: a Deployment `web` (3 replicas of busybox httpd answering
#     its pod's name), its Service, and a client pod.
#  2. Start the traffic, each loop in the background with its PID recorded (each ends after its
#     request in flight once the file $work/stop exists, so none lands during the checks):
#     - the writer creates ConfigMaps `w-<n>` through a random node's API server and records
#       each one the API server acknowledged;
#     - the roller starts a rolling update of `web` every 20 s (a new ROUND variable) and
#       records each one acknowledged;
#     - the prober asks the Service for an answer every 2 s from the client pod.
#  3. The nemesis, one fault at a time until D has passed: kill a node and start it again, or
#     partition a node from the other two and heal it; each held 10–30 s, with 5–15 s of calm
#     in between. Only one node is ever down or cut off, so the store keeps its quorum.
#  4. Heal: every node started and healed, Ready again; the traffic stopped.
#  5. Check the invariants and write the report (also to $lab_dir/chaos-report.txt):
#     - every ConfigMap the API server acknowledged is there;
#     - the Deployment converged: rolled out to the last acknowledged round, 3 replicas, all
#       updated and available;
#     - the Service's endpoints are exactly the IPs of the Deployment's ready pods;
#     - no pod runs twice: each `chaos` pod's container runs on its own node only, once (and the
#       check is not blind: every ready pod's containers are seen on its node, once the
#       agents have caught up with their restarts);
#     - the Service answered again after the faults.
#     The exit status is 0 only if every invariant holds.
#
# Run by `deploy/lab/lab chaos`, which passes its environment (lab_dir, the lab script).
set -euo pipefail
export LC_ALL=C

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lab="$here/lab"
lab_dir=${CHAOS_LAB_DIR:?run as deploy/lab/lab chaos}
ns=chaos

say() { echo "chaos: $*" >&2; }
die() { echo "chaos: error: $*" >&2; exit 1; }
kc() { "$lab" kubectl "$@"; }
kcn() { local n=$1; shift; "$lab" kubectl --node "$n" "$@"; }

duration=1800
seed=$(date +%s)
while [ $# -gt 0 ]; do
  case $1 in
    --duration) [ $# -ge 2 ] || die "--duration needs a value"; duration=$2; shift 2 ;;
    --duration=*) duration=${1#*=}; shift ;;
    --seed) [ $# -ge 2 ] || die "--seed needs a value"; seed=$2; shift 2 ;;
    --seed=*) seed=${1#*=}; shift ;;
    *) die "unknown argument $1 (lab chaos [--duration 30m] [--seed N])" ;;
  esac
done
case $duration in
  *h) duration=$(( ${duration%h} * 3600 )) ;;
  *m) duration=$(( ${duration%m} * 60 )) ;;
  *s) duration=${duration%s} ;;
esac
[[ $duration =~ ^[0-9]+$ ]] && [ "$duration" -gt 0 ] || die "--duration must be like 90s, 10m or 1h"
[[ $seed =~ ^[0-9]+$ ]] || die "--seed must be a number"
RANDOM=$((seed % 32768))

nodes=(node1 node2 node3)
seen=$(kc get nodes -o jsonpath='{.items[*].metadata.name}' 2>/dev/null || true)
for n in "${nodes[@]}"; do
  [[ " $seen " == *" $n "* ]] || die "chaos needs the three-node lab running (\`make lab\`); nodes seen: ${seen:-none}"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/kubelab-chaos.XXXXXX")
pids=()
undo=()   # what ends the fault in progress (`start node2`, `heal node3`), for an interrupted run
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ ${#undo[@]} -gt 0 ]; then "$lab" "${undo[@]}" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# ---- 1. the workload ----
say "seed $seed, ${duration}s; workload in namespace $ns"
kc delete namespace "$ns" --ignore-not-found --wait=true --timeout=120s >/dev/null
kc create namespace "$ns" >/dev/null
kc apply -n "$ns" -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  strategy: {rollingUpdate: {maxUnavailable: 1, maxSurge: 1}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        image: docker.io/library/busybox:1.36
        imagePullPolicy: Never
        env: [{name: ROUND, value: "0"}]
        command: [sh, -c, 'mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www']
        readinessProbe: {httpGet: {path: /, port: 80}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: client
    image: docker.io/library/busybox:1.36
    imagePullPolicy: Never
    command: [sleep, '86400']
EOF
kc -n "$ns" rollout status deployment/web --timeout=180s >/dev/null || die "the Deployment web never became available"
kc -n "$ns" wait --for=condition=Ready pod/client --timeout=120s >/dev/null || die "the client pod never became Ready"
say "workload ready"

# ---- 2. the traffic ----
: >"$work/acked-writes"
: >"$work/acked-rounds"
: >"$work/tried-rounds"
: >"$work/probes"
: >"$work/faults"
(
  n=0
  while [ ! -e "$work/stop" ]; do
    n=$((n + 1))
    via=${nodes[$((RANDOM % 3))]}
    if kcn "$via" -n "$ns" create configmap "w-$n" --from-literal=n="$n" >/dev/null 2>&1; then echo "$n" >>"$work/acked-writes"; fi
    sleep 0.5
  done
) & pids+=($!)
(
  r=0
  while :; do
    for _ in $(seq 1 20); do [ -e "$work/stop" ] && exit 0; sleep 1; done
    r=$((r + 1))
    via=${nodes[$((RANDOM % 3))]}
    echo "$r" >>"$work/tried-rounds"
    if kcn "$via" -n "$ns" set env deployment/web ROUND="$r" >/dev/null 2>&1; then echo "$r" >>"$work/acked-rounds"; fi
  done
) & pids+=($!)
(
  while [ ! -e "$work/stop" ]; do
    if out=$(kc -n "$ns" exec client -- timeout 3 wget -qO- http://web 2>/dev/null); then echo "$(date +%s) ok $out" >>"$work/probes"; else echo "$(date +%s) fail" >>"$work/probes"; fi
    sleep 2
  done
) & pids+=($!)

# ---- 3. the nemesis ----
start=$(date +%s)
end=$((start + duration))
fault() { echo "$(( $(date +%s) - start ))s $*" >>"$work/faults"; say "$*"; }
# inflict FAULT UNDO: `lab FAULT` the victim, hold it, then `lab UNDO` it.
inflict() {
  fault "$1 $victim for ${hold}s"
  undo=("$2" "$victim")
  "$lab" "$1" "$victim" >/dev/null 2>&1
  sleep "$hold"
  "$lab" "$2" "$victim" >/dev/null 2>&1
  undo=()
  fault "$2 $victim"
}
while [ "$(date +%s)" -lt "$end" ]; do
  sleep $((5 + RANDOM % 11))
  [ "$(date +%s)" -lt "$end" ] || break
  victim=${nodes[$((RANDOM % 3))]}
  hold=$((10 + RANDOM % 21))
  if [ $((RANDOM % 2)) = 0 ]; then inflict kill start; else inflict partition heal; fi
done

# ---- 4. heal and settle ----
say "faults over; waiting for every node to be Ready"
deadline=$(( $(date +%s) + 300 ))
until [ "$(kc get nodes -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null | grep -c True)" -ge 3 ]; do
  [ "$(date +%s)" -lt "$deadline" ] || die "the nodes were not all Ready 300 s after the last fault"
  sleep 2
done
# Stop the traffic: each loop finishes the request it has in flight and ends. Killing them
# would leave that request running, orphaned: a rollout acknowledged to nobody could land in
# the middle of the checks below. A loop still there after 30 s is killed: a write has long
# passed its 5 s request timeout by then, and only the prober's exec can hang (on a stream to a
# node that died under it), and it writes nothing.
touch "$work/stop"
for _ in $(seq 1 30); do
  alive=0
  for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then alive=1; fi; done
  [ "$alive" = 1 ] || break
  sleep 1
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
wait 2>/dev/null || true
pids=()

# ---- 5. the invariants ----
violations=()
report="$work/report"
{
  echo "kubelab lab chaos: seed $seed, ${duration}s of faults"
  echo "faults ($(wc -l <"$work/faults")):"
  sed 's/^/  /' "$work/faults"
} >"$report"

# Every acknowledged write is there.
acked=$(wc -l <"$work/acked-writes")
have=$(kc -n "$ns" get configmaps -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sed -n 's/^w-//p' | sort -n)
missing=$(comm -23 <(sort "$work/acked-writes") <(echo "$have" | sort) | tr '\n' ' ')
[ -z "$missing" ] || violations+=("acknowledged ConfigMaps missing: $missing")
echo "writes: $acked acknowledged, $(echo "$have" | grep -c . || true) present, missing: ${missing:-none}" >>"$report"

# The Deployment converged, at or past the last acknowledged round (a round whose request timed
# out may have been applied all the same) and at no round never asked for.
round=$(tail -n 1 "$work/acked-rounds" 2>/dev/null || true); round=${round:-0}
tried=$(tail -n 1 "$work/tried-rounds" 2>/dev/null || true); tried=${tried:-0}
if ! kc -n "$ns" rollout status deployment/web --timeout=240s >/dev/null 2>&1; then
  violations+=("the Deployment did not finish rolling out within 240 s")
fi
dep=$(kc -n "$ns" get deployment web -o jsonpath='{.spec.template.spec.containers[0].env[0].value} {.status.replicas} {.status.updatedReplicas} {.status.availableReplicas}')
read -r got_round replicas updated available <<<"$dep"
[[ ${got_round:-x} =~ ^[0-9]+$ ]] && [ "$got_round" -ge "$round" ] && [ "$got_round" -le "$tried" ] || violations+=("the Deployment's template is at round ${got_round:-none}; the last acknowledged is $round, the last tried $tried")
[ "${replicas:-0}" = 3 ] && [ "${updated:-0}" = 3 ] && [ "${available:-0}" = 3 ] || violations+=("the Deployment has replicas=$replicas updated=$updated available=$available (want 3 each)")
echo "rollouts: $(wc -l <"$work/acked-rounds") acknowledged, template at round $got_round; replicas $replicas, updated $updated, available $available" >>"$report"

# The Service's endpoints are the ready pods' IPs.
want_ips=$(kc -n "$ns" get pods -l app=web -o jsonpath='{range .items[*]}{.status.podIP} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' | awk '$2 == "True" && $3 == "" {print $1}' | sort | tr '\n' ' ')
got_ips=""
for _ in $(seq 1 30); do
  got_ips=$(kc -n "$ns" get endpointslices -l kubernetes.io/service-name=web -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' | sort | tr '\n' ' ')
  [ "$got_ips" = "$want_ips" ] && break
  sleep 2
done
[ "$got_ips" = "$want_ips" ] || violations+=("the Service's ready endpoints are [$got_ips], the ready pods' IPs [$want_ips]")
echo "service: endpoints [$got_ips], ready pods [$want_ips]" >>"$report"

# No pod runs twice: each pod's container runs on its own node, once. One look at every node
# fills `twice` (a pod's containers somewhere they must not run) and `blind` (a ready pod, not
# being deleted, whose containers are not seen on its own node: either the check cannot see,
# or the node's agent restarted with the last fault and has not yet reported its pods as they
# now are). `twice` is a violation at once; `blind` must clear within 60 s.
look_at_pods() {
  local pods name uid node ready deleting n uid_count running
  local -A count=()
  twice=() blind=() seen=0
  pods=$(kc -n "$ns" get pods -o jsonpath='{range .items[*]}{.metadata.name}|{.metadata.uid}|{.spec.nodeName}|{.status.conditions[?(@.type=="Ready")].status}|{.metadata.deletionTimestamp}{"\n"}{end}') || pods=""
  # Each node's containerd, asked once per look: how many containers of each pod run there.
  for n in "${nodes[@]}"; do
    # shellcheck disable=SC2016 # expanded inside the node
    while read -r uid_count; do
      if [ -n "$uid_count" ]; then count[$n/${uid_count% *}]=${uid_count#* }; fi
    done < <(docker exec -e POD_UIDS="$(cut -d'|' -f2 <<<"$pods")" "kubelab-$n" sh -c '
      tasks=$(ctr -n k8s.io tasks ls 2>/dev/null)
      for uid in $POD_UIDS; do
        echo "$uid $(for id in $(ctr -n k8s.io containers ls -q "labels.\"io.kubernetes.pod.uid\"==$uid"); do
          echo "$tasks" | awk -v id="$id" "\$1 == id && \$3 == \"RUNNING\""
        done | grep -c . || true)"
      done' 2>/dev/null || true)
  done
  while IFS='|' read -r name uid node ready deleting; do
    [ -n "$uid" ] || continue
    for n in "${nodes[@]}"; do
      running=${count[$n/$uid]:-0}
      # The sandbox counts as one container: a pod runs once where it has two (pause + its one).
      if [ "$n" = "$node" ] && [ "$running" -gt 2 ]; then twice+=("$name runs $running containers on $n"); fi
      if [ "$n" != "$node" ] && [ "$running" -gt 0 ]; then twice+=("$name ($node) also runs on $n"); fi
      if [ "$n" = "$node" ] && [ "$ready" = True ] && [ -z "$deleting" ]; then
        if [ "$running" = 0 ]; then blind+=("$name is ready but not seen running on $n"); else seen=$((seen + 1)); fi
      fi
    done
  done <<<"$pods"
}
looks=0
for _ in $(seq 1 30); do
  looks=$((looks + 1))
  look_at_pods
  [ ${#twice[@]} = 0 ] && [ ${#blind[@]} -gt 0 ] || break
  sleep 2
done
[ ${#twice[@]} = 0 ] || violations+=("${twice[@]}")
[ ${#blind[@]} = 0 ] || violations+=("${blind[@]}")
echo "pods running twice: ${#twice[@]}; ready pods seen running on their nodes: $seen, ${#blind[@]} not (after $looks look$([ "$looks" = 1 ] || echo s))" >>"$report"

# The Service answers again.
answered=""
for _ in $(seq 1 30); do
  if answered=$(kc -n "$ns" exec client -- timeout 3 wget -qO- http://web 2>/dev/null); then break; fi
  answered=""
  sleep 2
done
[ -n "$answered" ] || violations+=("the Service did not answer within 60 s of the last fault")
echo "probes during the run: $(grep -c ' ok ' "$work/probes" || true) answered, $(grep -c ' fail' "$work/probes" || true) failed; after: ${answered:-no answer}" >>"$report"

if [ ${#violations[@]} = 0 ]; then
  echo "result: every invariant held" >>"$report"
else
  echo "result: ${#violations[@]} violations" >>"$report"
  printf '  %s\n' "${violations[@]}" >>"$report"
fi
cp "$report" "$lab_dir/chaos-report.txt"
cat "$report"
rm -rf "$work"
[ ${#violations[@]} = 0 ]
