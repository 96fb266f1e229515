#!/usr/bin/env bash
# Cache-hit latency on a calm server while a reload rebuilds a big filter
# list (docs/performance.md "Holds"): what the Go processor governor costs
# when CPU work starts at once. nxdns in front of the fake DoT upstream,
# a local list of a million names, 100 cached names asked at QPS (default
# 2 000, a busy household) for 6 s; 2 s in, one line is appended to the
# list and nxdns gets SIGHUP, so the list is read again (about a second of
# CPU). Each round runs a fresh server governed, then one with GOMAXPROCS
# set to the CPUs (not governed), and prints the answers, p50/p99/p99.9/max
# of the answered, the queries over 5 ms, the reload's rebuilds, and the
# governor's debug lines (a hold says "why": "held"). To see the governor
# without holds, run the script at a commit before them (82b85fd^).
#
# Every process is started here and stopped by its PID. Bounded: ROUNDS
# rounds (default 3) of two servers, each about 12 s.
# Usage: [ROUNDS=N] [QPS=N] scripts/rebuild-latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
qps=${QPS:-2000}
for t in dnsperf curl; do
  command -v "$t" >/dev/null || { echo "$t not installed"; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "one CPU: the governor does not run, nothing to compare"; exit 1; }

. scripts/lib.sh
bench_init

bench_build nxdns nxdns-fakeup
base=$(( 20000 + RANDOM % 20000 ))
dot=$base fk=$((base + 1)) nx=$((base + 2)) web=$((base + 3))
bench_fakeup "$fk" -listen "dot://127.0.0.1:$dot" -ttl 86400 -cert-names "upstream.test,127.0.0.1"
seq 1 1000000 | sed 's/^/ad/; s/$/.block.test/' >"$work/list.txt"
for i in $(seq 1 100); do echo "host$i.cache.test A"; done >"$work/hot"
cat >"$work/nxdns.toml" <<TOML
[dns]
listen = ["127.0.0.1:$nx"]
[web]
listen = "127.0.0.1:$web"
[log]
queries = false
level = "debug"
[[filter.lists]]
name = "big"
path = "$work/list.txt"
[[filter.groups]]
name = "default"
lists = ["big"]
$(bench_upstream "$dot")
TOML

# one MODE: a fresh server (MODE governed, or not), warmed, calm for 3 s
# (the governor puts a calm server on one processor after 2 s), then the
# measured run with the reload 2 s in.
one() {
  local env=(-u GOMAXPROCS)
  [ "$1" = governed ] || env=("GOMAXPROCS=$(nproc)")
  env "${env[@]}" "$work/nxdns" run --config "$work/nxdns.toml" 2>"$work/nxdns.log" &
  local pid=$!
  pids+=($pid)
  bench_wait_serving "$work/nxdns.log"
  dnsperf -s 127.0.0.1 -p "$nx" -d "$work/hot" -l 1 -c 8 -T 1 -q 64 -S 0 >/dev/null 2>&1
  sleep 3
  (sleep 2; echo "ad0.block.test" >>"$work/list.txt"; kill -HUP "$pid") &
  local hup=$!
  pids+=($hup)
  dnsperf -s 127.0.0.1 -p "$nx" -d "$work/hot" -l 6 -Q "$qps" -c 8 -T 1 -t 5 -v 2>/dev/null |
    awk '/^> /{print $NF}' >"$work/lat"
  wait "$hup"
  local procs
  procs=$(grep 'go processors' "$work/nxdns.log" | grep -o '{.*}' | cut -d, -f1-2 | tr '\n' ' ' || true)
  sort -g "$work/lat" | awk -v m="$1" -v p="$procs" -v swaps="$(($(grep -c 'rules swapped' "$work/nxdns.log") - 1))" \
    '{a[NR]=$1; if ($1 > 0.005) slow++} END {if (NR == 0) {print m": no samples"; exit}
      printf "%-12s answered %d, p50 %.3f p99 %.3f p99.9 %.3f max %.3f ms, over 5 ms %d, reload rebuilds %d; %s\n",
        m, NR, a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000, a[int(NR*0.999)]*1000, a[NR]*1000, slow+0, swaps, p}'
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pids=("${pids[@]:0:${#pids[@]}-2}") # both ended: not to be signalled again at exit
}

for r in $(seq 1 "$rounds"); do
  echo "== round $r"
  one governed
  one "GOMAXPROCS=$(nproc)"
done
