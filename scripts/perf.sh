#!/usr/bin/env bash
# Throughput on loopback with dnsperf (Debian package dnsperf): nxdns in front
# of a zero-latency fake DoT upstream, next to the fake upstream's own UDP
# ceiling. Every name is unique per run, so the cache never answers and every
# query is forwarded over DoT. Bounded: each dnsperf run lasts SECONDS.
# Usage: scripts/perf.sh [SECONDS]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
command -v dnsperf >/dev/null || { echo "dnsperf not installed (apt-get install dnsperf)"; exit 1; }

. scripts/lib.sh
bench_init

bench_build nxdns nxdns-fakeup nxdns-burst
base=$(( 20000 + RANDOM % 20000 ))
dot=$base udp=$((base + 1)) dns=$((base + 2)) web=$((base + 3)) fk=$((base + 4))

bench_fakeup "$fk" -listen "dot://127.0.0.1:$dot" -listen "udp://127.0.0.1:$udp" -cert-names "upstream.test"

cat >"$work/nxdns.toml" <<TOML
[dns]
listen = ["127.0.0.1:$dns"]
[web]
listen = "127.0.0.1:$web"
[log]
queries = false
$(bench_upstream "$dot")
TOML
"$work/nxdns" run --config "$work/nxdns.toml" 2>"$work/nxdns.log" &
pids+=($!)
bench_wait_serving "$work/nxdns.log"

prefix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
for i in $(seq 1 200000); do echo "p$prefix-$i.perf.test A"; done >"$work/queries"

run() { # label port
  echo "== $1"
  dnsperf -s 127.0.0.1 -p "$2" -d "$work/queries" -l "$secs" -c 8 -T 2 -q 256 -t 5 -S 0 2>&1 |
    grep -E "Queries sent|Queries completed|Queries lost|Queries per second|Average Latency|Latency StdDev|Response codes"
}
run "fake upstream alone (UDP, its ceiling)" "$udp"
run "nxdns -> fake DoT upstream (zero latency)" "$dns"
echo "== latency percentiles at a fixed 10000 QPS for 5 s (nxdns-burst)"
"$work/nxdns-burst" -target "127.0.0.1:$dns" -rate 10000 -duration 5s -timeout 2s -baseline 0
echo
echo "== nxdns upstream series after the runs"
curl -fsS "http://127.0.0.1:$web/metrics" | grep -E '^nxdns_upstream_(requests_total|queued_total|budget_exhausted_total)'
