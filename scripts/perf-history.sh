#!/usr/bin/env bash
# DNS throughput with the query history on versus off
# (docs/performance.md#history): dnsperf against two real nxdns binaries in front of the same
# zero-latency fake DoT upstream, runs interleaved so machine noise hits
# both alike. "off" is a binary built from BASE (default: the merge base
# with main, which has no history); "on" is this tree with history.path on
# disk and the default flush of 60 s. Bounded: ROUNDS x 2 runs of SECONDS.
# Usage: scripts/perf-history.sh [SECONDS] [ROUNDS] [BASE]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10} rounds=${2:-3} base=${3:-$(git merge-base HEAD main 2>/dev/null || echo main)}
command -v dnsperf >/dev/null || { echo "dnsperf not installed (apt-get install dnsperf)"; exit 1; }

. scripts/lib.sh
bench_init

bench_build nxdns nxdns-fakeup
mv "$work/nxdns" "$work/nxdns-on"
mkdir "$work/base"
git archive "$base" | tar -x -C "$work/base"
(cd "$work/base" && CGO_ENABLED=0 go build -trimpath -o "$work/nxdns-off" ./cmd/nxdns) # as bench_build builds

port=$(( 20000 + RANDOM % 20000 ))
dot=$port fk=$((port + 1))
bench_fakeup "$fk" -listen "dot://127.0.0.1:$dot" -cert-names "upstream.test"

start() { # name dnsport webport extra-toml
  cat >"$work/$1.toml" <<TOML
[dns]
listen = ["127.0.0.1:$2"]
[web]
listen = "127.0.0.1:$3"
[log]
queries = false
$(bench_upstream "$dot")
$4
TOML
  "$work/nxdns-$1" run --config "$work/$1.toml" 2>"$work/$1.log" &
  pids+=($!)
  eval "pid_$1=$!"
  bench_wait_serving "$work/$1.log"
}
start off $((port + 2)) $((port + 3)) ""
start on $((port + 4)) $((port + 5)) "[history]
path = \"$work/history.db\""

prefix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
for i in $(seq 1 300000); do echo "p$prefix-$i.perf.test A"; done >"$work/queries"

run() { # label port
  dnsperf -s 127.0.0.1 -p "$2" -d "$work/queries" -l "$secs" -c 8 -T 2 -q 256 -t 5 -S 0 2>&1 |
    awk -v l="$1" '/Queries per second/ {q=$4} /Average Latency/ {a=$4} END {printf "%s qps %s avg_latency_s %s\n", l, q, a}'
}
for r in $(seq 1 "$rounds"); do
  run "round $r off" $((port + 2))
  run "round $r on " $((port + 4))
done
rss() { awk '/VmRSS|VmHWM/ {printf "%s %s kB  ", $1, $2}' "/proc/$1/status"; echo; }
echo "RSS history off: $(rss "$pid_off")"
echo "RSS history on:  $(rss "$pid_on")"
sleep 61 # one flush interval: the history writes what the runs recorded
echo "RSS history on after a flush: $(rss "$pid_on")"
curl -fsS "http://127.0.0.1:$((port + 5))/metrics" | grep -E '^nxdns_history_'
ls -l "$work/history.db"
