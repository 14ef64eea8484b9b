#!/usr/bin/env bash
# Starts a three-member `kubelab store`, the API server, the controller manager and the scheduler
# on loopback and stays in the foreground; Ctrl-C (or SIGTERM) stops them all cleanly.
#
#   KUBELAB_BIN   the kubelab binary (default: $CARGO_TARGET_DIR or ./target, debug)
#   KUBELAB_DATA  data and logs (default /tmp/kubelab-up); kept between runs
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
bin="${KUBELAB_BIN:-${CARGO_TARGET_DIR:-$here/target}/debug/kubelab}"
data="${KUBELAB_DATA:-/tmp/kubelab-up}"
[[ -x "$bin" ]] || { echo "kubelab binary not found at $bin (run make build)" >&2; exit 1; }

names=(kubelab-0 kubelab-1 kubelab-2)
client_ports=(2379 22379 32379)
peer_ports=(2380 22380 32380)
metrics_ports=(2381 22381 32381)
token="kubelab-up"

cluster=""
for i in 0 1 2; do
    cluster+="${cluster:+,}${names[$i]}=http://127.0.0.1:${peer_ports[$i]}"
done

pids=()
stop() {
    trap - INT TERM
    echo
    echo "stopping kubelab (pids ${pids[*]})"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    echo "stopped; data kept in $data"
    exit 0
}
trap stop INT TERM

# Logs go to files: keep ANSI colour codes out of them.
export NO_COLOR=1
mkdir -p "$data"
endpoints=""
for i in 0 1 2; do
    n="${names[$i]}"
    mkdir -p "$data/$n"
    "$bin" store \
        --name "$n" \
        --data-dir "$data/$n/data" \
        --listen-client-urls "http://127.0.0.1:${client_ports[$i]}" \
        --advertise-client-urls "http://127.0.0.1:${client_ports[$i]}" \
        --listen-peer-urls "http://127.0.0.1:${peer_ports[$i]}" \
        --initial-advertise-peer-urls "http://127.0.0.1:${peer_ports[$i]}" \
        --initial-cluster "$cluster" \
        --initial-cluster-state new \
        --initial-cluster-token "$token" \
        --listen-metrics-urls "http://127.0.0.1:${metrics_ports[$i]}" \
        >>"$data/$n/stdout.log" 2>>"$data/$n/stderr.log" </dev/null &
    pids+=("$!")
    endpoints+="${endpoints:+,}http://127.0.0.1:${client_ports[$i]}"
    echo "started $n (pid $!): client http://127.0.0.1:${client_ports[$i]}, peer http://127.0.0.1:${peer_ports[$i]}, logs $data/$n/stderr.log"
done

# The API server on all three members, and the controller manager.
bare="${endpoints//http:\/\//}"
mkdir -p "$data/apiserver" "$data/controller-manager" "$data/scheduler"
"$bin" apiserver --etcd-servers "$endpoints" --bind-address 127.0.0.1 --port 8080 \
    >>"$data/apiserver/stdout.log" 2>>"$data/apiserver/stderr.log" </dev/null &
pids+=("$!")
names+=(apiserver)
echo "started apiserver (pid $!): http://127.0.0.1:8080, logs $data/apiserver/stderr.log"
"$bin" controller-manager --master http://127.0.0.1:8080 \
    >>"$data/controller-manager/stdout.log" 2>>"$data/controller-manager/stderr.log" </dev/null &
pids+=("$!")
names+=(controller-manager)
echo "started controller-manager (pid $!), logs $data/controller-manager/stderr.log"
"$bin" scheduler --master http://127.0.0.1:8080 --leader-elect --bind-address 127.0.0.1 --port 10251 \
    >>"$data/scheduler/stdout.log" 2>>"$data/scheduler/stderr.log" </dev/null &
pids+=("$!")
names+=(scheduler)
echo "started scheduler (pid $!): /metrics on http://127.0.0.1:10251, logs $data/scheduler/stderr.log"

echo
echo "store endpoints: $endpoints"
echo "try:"
echo "  ETCDCTL_API=3 etcdctl --endpoints=$bare put foo bar"
echo "  ETCDCTL_API=3 etcdctl --endpoints=$bare endpoint status -w table"
echo "  kubectl -s http://127.0.0.1:8080 get namespaces"
echo "  kubectl -s http://127.0.0.1:8080 create configmap hello --from-literal=greeting=hi"
echo "  kubectl -s http://127.0.0.1:8080 run web --image=busybox   # Pending: no node agent yet; describe it to see why"
echo "Ctrl-C stops everything."

# Stay in the foreground; if a process dies on its own, say so and stop the others.
while true; do
    for i in "${!pids[@]}"; do
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            log="$data/${names[$i]}/stderr.log"
            echo "${names[$i]} exited; last log lines:" >&2
            tail -n 20 "$log" >&2 || true
            stop
        fi
    done
    sleep 1
done
