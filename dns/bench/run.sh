#!/usr/bin/env bash
# Queries per second and p99 latency of kubelab's DNS server against dnsmasq, each serving the
# same N names (A records of ClusterIP Services), measured by dnsperf over loopback UDP, one after
# the other in the same run. kubelab's side is `kubelab dns`'s server with its index fed
# in-process (dns/bench/server.rs): the watches do not touch the query path.
# Needs dnsperf and dnsmasq (Debian: dnsperf, dnsmasq-base). Loopback only; every process it
# starts is stopped by its PID on exit.
#
#   dns/bench/run.sh            # 1,000 names, 4 clients, 15 s per throughput run
#   SERVICES=5000 DURATION=30 dns/bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

SERVICES=${SERVICES:-1000}
DURATION=${DURATION:-15}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-100}
PORT_KUBELAB=${PORT_KUBELAB:-15354}
PORT_DNSMASQ=${PORT_DNSMASQ:-15353}
TARGET_DIR=${CARGO_TARGET_DIR:-target}

cargo build --release -p dns --example bench-server

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# The same names both ways: svc-<i>.bench.svc.cluster.local -> 10.96.0.0 + i + 1.
for ((i = 0; i < SERVICES; i++)); do
    n=$((i + 1))
    echo "10.96.$((n / 256)).$((n % 256)) svc-$i.bench.svc.cluster.local"
done > "$work/hosts"
awk '{print $2 " A"}' "$work/hosts" > "$work/queries"

"$TARGET_DIR/release/examples/bench-server" "127.0.0.1:$PORT_KUBELAB" "$SERVICES" 2> "$work/kubelab.log" &
pids+=($!)
dnsmasq --keep-in-foreground --port="$PORT_DNSMASQ" --listen-address=127.0.0.1 --bind-interfaces \
    --no-resolv --no-hosts --addn-hosts="$work/hosts" --conf-file=/dev/null --cache-size=10000 \
    --dns-forward-max=1000 --user=root --pid-file= 2> "$work/dnsmasq.log" &
pids+=($!)

# Both answer the first name before the runs start.
for port in "$PORT_KUBELAB" "$PORT_DNSMASQ"; do
    for _ in $(seq 50); do
        if head -1 "$work/queries" | dnsperf -s 127.0.0.1 -p "$port" -n 1 -t 1 2> /dev/null | grep -q "NOERROR 1"; then
            continue 2
        fi
        sleep 0.2
    done
    echo "the server on port $port does not answer" >&2
    exit 1
done

measure() { # name port
    local qps p99 lost
    # Throughput: as many queries as CLIENTS keep OUTSTANDING in flight.
    dnsperf -s 127.0.0.1 -p "$2" -d "$work/queries" -c "$CLIENTS" -q "$OUTSTANDING" -l "$DURATION" > "$work/$1.qps" 2>&1
    qps=$(awk '/Queries per second/ {printf "%d", $4}' "$work/$1.qps")
    lost=$(awk '/Queries lost/ {print $3}' "$work/$1.qps")
    # Latency: each query's time (-v), at a third of that rate, so the figure is the server's
    # and not a queue's.
    dnsperf -s 127.0.0.1 -p "$2" -d "$work/queries" -c "$CLIENTS" -Q $((qps / 3 + 1)) -l "$DURATION" -v > "$work/$1.lat" 2>&1
    p99=$(awk '/^> / {print $NF}' "$work/$1.lat" | sort -g | awk '{a[NR] = $1} END {printf "%.3f", a[int(NR * 0.99)] * 1000}')
    p50=$(awk '/^> / {print $NF}' "$work/$1.lat" | sort -g | awk '{a[NR] = $1} END {printf "%.3f", a[int(NR * 0.50)] * 1000}')
    printf "%-14s %10s q/s  (lost %s)   at %6d q/s: p50 %s ms, p99 %s ms\n" "$1" "$qps" "$lost" $((qps / 3 + 1)) "$p50" "$p99"
}

echo "dnsperf: $SERVICES names, $CLIENTS clients, $OUTSTANDING outstanding, ${DURATION}s per run, UDP on loopback ($(nproc) cores)"
measure "kubelab dns" "$PORT_KUBELAB"
measure "dnsmasq" "$PORT_DNSMASQ"
