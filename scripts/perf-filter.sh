#!/usr/bin/env bash
# Filtering on versus off, measured with dnsperf on loopback (Debian package
# dnsperf): nxdns in front of a zero-latency fake DoT upstream, once with no
# lists and once with a 1 000 000-name hosts list loaded; unique names not on
# the list (every query is filtered, then forwarded), then names on the list
# (answered by the filter), then 100 names asked over and over (cache hits:
# the filter still decides every one before the cache answers). Runs
# alternate off/on so both see the same machine load. Bounded: each dnsperf run lasts SECONDS.
# Usage: scripts/perf-filter.sh [SECONDS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-5}
command -v dnsperf >/dev/null || { echo "dnsperf not installed (apt-get install dnsperf)"; exit 1; }

. scripts/lib.sh
bench_init

bench_build nxdns nxdns-fakeup
base=$(( 20000 + RANDOM % 20000 ))
dot=$base fk=$((base + 1)) off=$((base + 2)) on=$((base + 3))

bench_fakeup "$fk" -listen "dot://127.0.0.1:$dot" -cert-names "upstream.test"

seq 1 1000000 | awk '{ printf "0.0.0.0 ads%d.tracker-network.example\n", $1 }' >"$work/list.txt"

start() { # name port extra-toml
  cat >"$work/$1.toml" <<TOML
[dns]
listen = ["127.0.0.1:$2"]
[web]
listen = ""
[log]
queries = false
$(bench_upstream "$dot")
$3
TOML
  "$work/nxdns" run --config "$work/$1.toml" 2>"$work/$1.log" &
  pids+=($!)
  bench_wait_serving "$work/$1.log"
}
start off "$off" ""
start on "$on" "[[filter.lists]]
name = \"big\"
path = \"$work/list.txt\""
grep -h "filter rules swapped in" "$work/on.log" | tail -1
echo "RSS (KiB): off $(grep VmRSS /proc/${pids[1]}/status | awk '{print $2}'), on $(grep VmRSS /proc/${pids[2]}/status | awk '{print $2}')"

prefix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
for i in $(seq 1 200000); do echo "p$prefix-$i.perf.test A"; done >"$work/miss"
shuf -n 200000 "$work/list.txt" | awk '{ print $2 " A" }' >"$work/hit"

run() { # label port queries
  printf '%-48s' "$1"
  dnsperf -s 127.0.0.1 -p "$2" -d "$3" -l "$secs" -c 8 -T 2 -q 256 -t 5 -S 0 2>&1 |
    awk '/Queries per second/ { q=$4 } /Average Latency/ { l=$4 } END { printf "%10s QPS  avg %s s\n", q, l }'
}
for i in $(seq 1 100); do echo "hot$i.perf.test A"; done >"$work/hot"
run "off: warm the cache" "$off" "$work/hot" >/dev/null
run "on: warm the cache" "$on" "$work/hot" >/dev/null
for round in 1 2; do
  run "off: forwarded (round $round)" "$off" "$work/miss"
  run "on, 1M names: filtered, forwarded (round $round)" "$on" "$work/miss"
  run "off: cache hits (round $round)" "$off" "$work/hot"
  run "on, 1M names: filtered, cache hits (round $round)" "$on" "$work/hot"
done
run "on, 1M names: blocked by the filter" "$on" "$work/hit"
