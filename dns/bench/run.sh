#!/usr/bin/env bash
# Queries per second and p99 latency of kubelab's DNS server against dnsmasq, each serving the
# same N names (A records of ClusterIP Services), measured by dnsperf over loopback UDP, one after
# the other in the same run. kubelab's side is `kubelab dns`'s server with its index fed
# in-process (dns/bench/server.rs): the watches do not touch the query path.
# Needs dnsperf and dnsmasq (Debian: dnsperf, dnsmasq-base). Loopback only; every process it
# starts is stopped by its PID on exit.
#
#   dns/bench/run.sh            # 1,000 names, 4 clients, 5 rounds of 6 s, 15 s latency runs
#   SERVICES=5000 ROUNDS=9 DURATION=30 dns/bench/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

SERVICES=${SERVICES:-1000}
DURATION=${DURATION:-15}
ROUNDS=${ROUNDS:-5}
ROUND_SECONDS=${ROUND_SECONDS:-6}
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

qps_of() { # port seconds -> queries per second at saturation (and lost queries, to stderr)
    # As many queries as CLIENTS keep OUTSTANDING in flight.
    dnsperf -s 127.0.0.1 -p "$1" -d "$work/queries" -c "$CLIENTS" -q "$OUTSTANDING" -l "$2" > "$work/qps" 2>&1
    awk '/Queries lost/ {lost = $3} /Queries per second/ {qps = $4} END {printf "%d %s\n", qps, lost}' "$work/qps"
}

latency() { # name port rate -> p50 and p99 of each query's time (-v) at that rate
    dnsperf -s 127.0.0.1 -p "$2" -d "$work/queries" -c "$CLIENTS" -Q "$3" -l "$DURATION" -v > "$work/lat" 2>&1
    awk '/^> / {print $NF}' "$work/lat" | sort -g > "$work/lat.sorted"
    local p50 p99 lost
    p50=$(awk '{a[NR] = $1} END {printf "%.3f", a[int(NR * 0.50)] * 1000}' "$work/lat.sorted")
    p99=$(awk '{a[NR] = $1} END {printf "%.3f", a[int(NR * 0.99)] * 1000}' "$work/lat.sorted")
    lost=$(awk '/Queries lost/ {print $3}' "$work/lat")
    printf "  %-12s at %6d q/s: p50 %s ms, p99 %s ms (lost %s)\n" "$1" "$3" "$p50" "$p99" "$lost"
}

median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

echo "dnsperf: $SERVICES names, $CLIENTS clients, $OUTSTANDING outstanding, UDP on loopback ($(nproc) cores)"
# Throughput: ROUNDS rounds of ROUND_SECONDS each, the two servers one after the other in each
# round (which goes first alternates), so that both meet the same moments of a busy machine;
# the medians, and the median of the rounds' ratios.
echo "throughput at saturation, $ROUNDS rounds of ${ROUND_SECONDS}s each:"
: > "$work/k"; : > "$work/d"; : > "$work/r"
for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then
        read -r k kl < <(qps_of "$PORT_KUBELAB" "$ROUND_SECONDS"); read -r d dl < <(qps_of "$PORT_DNSMASQ" "$ROUND_SECONDS")
    else
        read -r d dl < <(qps_of "$PORT_DNSMASQ" "$ROUND_SECONDS"); read -r k kl < <(qps_of "$PORT_KUBELAB" "$ROUND_SECONDS")
    fi
    echo "$k" >> "$work/k"; echo "$d" >> "$work/d"; awk -v k="$k" -v d="$d" 'BEGIN {printf "%.3f\n", k / d}' >> "$work/r"
    printf "  round %d: kubelab dns %7d q/s (lost %s), dnsmasq %7d q/s (lost %s), ratio %s\n" "$r" "$k" "$kl" "$d" "$dl" "$(tail -1 "$work/r")"
done
kq=$(median < "$work/k"); dq=$(median < "$work/d")
printf "  median: kubelab dns %d q/s, dnsmasq %d q/s; median ratio %s\n" "$kq" "$dq" "$(median < "$work/r")"
# Latency, over DURATION seconds: each at a third of its own median rate (the server's and not a
# queue's figure), and kubelab's at dnsmasq's third too (the same load for both).
echo "latency of each query, ${DURATION}s per run:"
latency "kubelab dns" "$PORT_KUBELAB" $((kq / 3 + 1))
latency "dnsmasq" "$PORT_DNSMASQ" $((dq / 3 + 1))
latency "kubelab dns" "$PORT_KUBELAB" $((dq / 3 + 1))
