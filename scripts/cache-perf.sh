#!/usr/bin/env bash
# Cache-hit throughput on loopback (docs/performance.md "Answer cache"):
# nxdns, dnsdist with its packet cache and Unbound, started side by side in
# one run, each forwarding over DoT to the same fake upstream, asked a small
# set of names over and over with dnsperf, beside the floor of a Go UDP
# server on this machine (cmd/nxdns-udpfloor). Then nxdns's memory per
# cached entry: RSS at 0, 10 000 and 100 000 entries.
#
# Every process is started here and stopped by its PID. Bounded: ROUNDS
# rounds (default 3), each with, per server, two warm-ups and two measured
# dnsperf runs (SECONDS each) and two fixed-rate runs for latency
# percentiles and the server's CPU time per query (5 s): once sharing both
# CPUs with dnsperf, once with the server on CPU 1 and dnsperf on CPU 0. Then two fills for the memory
# figures. A run during which the virtual machine's host took the CPUs
# (steal time) is run again, at most TRIES times. Prints each round's
# figures and their medians over the rounds.
# The phase steal-binned (not run by default) measures p99 in 1 s runs,
# grouped by the steal each run suffered (below).
# Usage: [ROUNDS=N] [PHASES="throughput latency pinned-throughput
#        pinned-latency steal-binned"] [TRIES=N] [STEAL_PERMILLE=N]
#        scripts/cache-perf.sh [SECONDS]   (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${ROUNDS:-3}
# The retries for the host's steal time and the phases (both below).
tries=${TRIES:-4}
steal_permille=${STEAL_PERMILLE:-5}
[[ "$tries" =~ ^[1-9][0-9]*$ && "$steal_permille" =~ ^[0-9]+$ ]] || {
  echo "TRIES must be 1 or more and STEAL_PERMILLE 0 or more" >&2; exit 1; }
phases=" ${PHASES:-throughput latency pinned-throughput pinned-latency} "
for p in $phases; do
  case $p in throughput | latency | pinned-throughput | pinned-latency | steal-binned) ;;
  *) echo "PHASES: unknown phase $p (throughput, latency, pinned-throughput, pinned-latency, steal-binned)" >&2; exit 1 ;;
  esac
done
for t in dnsperf dnsdist unbound curl taskset; do
  command -v "$t" >/dev/null || { echo "$t not installed"; exit 1; }
done

. scripts/lib.sh
bench_init

bench_build nxdns nxdns-fakeup nxdns-udpfloor
base=$(( 20000 + RANDOM % 20000 ))
dot=$base fk=$((base + 1)) nx=$((base + 2)) web=$((base + 3)) dd=$((base + 4)) ub=$((base + 5)) ddc=$((base + 6)) fl=$((base + 7))

# The upstream: TTL one day, so nothing expires during the run.
bench_fakeup "$fk" -listen "dot://127.0.0.1:$dot" -ttl 86400 -cert-names "upstream.test,127.0.0.1"

cat >"$work/nxdns.toml" <<TOML
[dns]
listen = ["127.0.0.1:$nx"]
cache_size = 200000
[web]
listen = "127.0.0.1:$web"
[log]
queries = false
# The history records every query as in production, but in a 1 MiB budget:
# with the default 256 MiB in memory (no history.path) the millions of
# benchmark queries would fill it and hide the cache's memory figures.
[history]
max_bytes = 1048576
$(bench_upstream "$dot")
TOML
"$work/nxdns" run --config "$work/nxdns.toml" 2>"$work/nxdns.log" &
nxpid=$!
pids+=($nxpid)

cat >"$work/dnsdist.conf" <<LUA
setLocal("127.0.0.1:$dd")
controlSocket("127.0.0.1:$ddc")
setSecurityPollSuffix("")
newServer({address="127.0.0.1:$dot", tls="openssl", subjectName="upstream.test", caStore="$work/ca.pem"})
pc = newPacketCache(200000)
getPool(""):setCache(pc)
LUA
dnsdist --supervised --disable-syslog -C "$work/dnsdist.conf" >"$work/dnsdist.log" 2>&1 &
ddpid=$!
pids+=($ddpid)

cat >"$work/unbound.conf" <<CONF
server:
  interface: 127.0.0.1@$ub
  port: $ub
  num-threads: 2
  do-daemonize: no
  use-syslog: no
  chroot: ""
  username: ""
  directory: "$work"
  pidfile: ""
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  tls-cert-bundle: "$work/ca.pem"
  qname-minimisation: no
  module-config: "iterator"
forward-zone:
  name: "."
  forward-tls-upstream: yes
  forward-addr: 127.0.0.1@$dot#upstream.test
CONF
unbound -d -c "$work/unbound.conf" >"$work/unbound.log" 2>&1 &
ubpid=$!
pids+=($ubpid)

# The floor: a Go UDP server that echoes each query as its answer and does
# nothing else (cmd/nxdns-udpfloor). What nxdns costs above it is nxdns's;
# what the floor costs above Unbound and dnsdist is the Go runtime's.
"$work/nxdns-udpfloor" -listen "127.0.0.1:$fl" 2>"$work/udpfloor.log" &
flpid=$!
pids+=($flpid)

ready() { # port: answers a query
  for _ in $(seq 1 100); do
    dnsperf -s 127.0.0.1 -p "$1" -d <(echo "ready.cache.test A") -n 1 -t 1 2>/dev/null | grep -q "Queries completed: *1 " && return 0
    sleep 0.1
  done
  echo "server on port $1 did not come up" >&2; return 1
}
ready "$nx"; ready "$dd"; ready "$ub"; ready "$fl"

# 100 names asked over and over: after the first pass, every query is a hit.
for i in $(seq 1 100); do echo "host$i.cache.test A"; done >"$work/hot"
# One pass each before any phase, so a round of latency alone (PHASES)
# measures hits too.
for p in "$nx" "$dd" "$ub" "$fl"; do dnsperf -s 127.0.0.1 -p "$p" -d "$work/hot" -n 1 -c 8 -T 2 -t 5 >/dev/null 2>&1; done

# On a virtual machine the host takes the CPUs from time to time (steal
# time, /proc/stat). At 20 000 QPS a tick of it (10 ms) holds up 200
# queries: on a host with steal, each run's p99 followed the share the host
# took, for every server alike (docs/performance.md "Steal"). A run in
# which the host took more than STEAL_PERMILLE (default 5) thousandths of
# the CPUs' time measures the host, so it is run again, at most TRIES times
# in all (default 4), whichever server it was; each line says how many
# ticks the host took from the run kept.
# Steal is counted over every online CPU, whatever this script's affinity.
cpus=$(getconf _NPROCESSORS_ONLN)
steal() { awk '/^cpu /{print $9; exit}' /proc/stat; }
# counts S0 SECONDS TRY: sets took (ticks stolen since S0) and is true when
# the run counts or was the last try.
counts() {
  took=$(($(steal) - $1))
  [ $((took * 1000)) -le $((steal_permille * $2 * cpus * $(getconf CLK_TCK))) ] && return 0
  if [ "$3" -ge "$tries" ]; then
    kept_stolen=$((kept_stolen + 1))
    return 0
  fi
  repeated=$((repeated + 1))
  echo "   (the host took $took ticks of CPU during the run: again)"
  return 1
}
repeated=0 kept_stolen=0

# Each result also goes to $work/results as "label<TAB>metric<TAB>value",
# for the medians printed at the end.
measure() { # label port [pid]: with PID, the server on CPU 1 and dnsperf on CPU 0 (see percentiles)
  local pin=() tag="" m=""
  if [ -n "${3:-}" ] && [ "$(nproc)" -ge 2 ]; then
    pin_server "$3"
    pin=(taskset -c 0) tag=" (server on CPU 1, dnsperf on CPU 0)" m="pinned "
  fi
  "${pin[@]}" dnsperf -s 127.0.0.1 -p "$2" -d "$work/hot" -l 2 -c 8 -T 2 -q 256 -t 5 -S 0 >/dev/null 2>&1 # warm-up
  local try s0
  for try in $(seq 1 "$tries"); do
    s0=$(steal)
    "${pin[@]}" dnsperf -s 127.0.0.1 -p "$2" -d "$work/hot" -l "$secs" -c 8 -T 2 -q 256 -t 5 -S 0 >"$work/tp" 2>&1
    counts "$s0" "$secs" "$try" && break
  done
  echo "== $1: max throughput, ${secs} s$tag (the host took $took ticks)"
  grep -E "Queries completed|Queries lost|Queries per second|Average Latency" "$work/tp"
  awk -v l="$1" -v m="$m" '/Queries per second/{printf "%s\t%sqps\t%d\n", l, m, $NF}' "$work/tp" >>"$work/results"
  printf '%s\t%sqps host ticks\t%d\n' "$1" "$m" "$took" >>"$work/results"
  [ -z "$tag" ] || unpin_server "$3"
}
# nxdns's Go runtime follows its CPU affinity within about a second: wait
# until it uses $1 processors (go_sched_gomaxprocs_threads), at most 5 s.
# Only pinning waits: unpinned, nxdns's governor (internal/procs) keeps a
# calm server on one processor and gives it every CPU once a load needs them.
gomaxprocs() {
  for _ in $(seq 1 50); do
    [ "$(curl -fsS "http://127.0.0.1:$web/metrics" | awk '/^go_sched_gomaxprocs_threads/{print $2}')" = "$1" ] && return 0
    sleep 0.1
  done
  echo "nxdns did not follow its CPU affinity to $1 processors" >&2
}
pin_server() { # pid: all its threads to CPU 1
  taskset -a -p -c 1 "$1" >/dev/null
  [ "$1" = "$nxpid" ] && gomaxprocs 1
  return 0
}
unpin_server() { # pid: back to every CPU
  taskset -a -p -c "0-$(($(nproc) - 1))" "$1" >/dev/null
}
# cputicks PID: the CPU time the process has used, user and system, in
# clock ticks (/proc/PID/stat).
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# percentiles LABEL PORT PID [pinned]: latency at a fixed rate every server
# sustains, and the server's CPU time per query meanwhile. Pinned, the
# server is moved to CPU 1 for the run and dnsperf and its reader to CPU 0:
# in the field the clients are other machines, and sharing two cores with
# the load generator measures the CPU contention between them as much as
# the server. There, the tail follows the CPU each query costs the server
# (docs/performance.md "Answer cache"), hence the figure.
percentiles() {
  local pin=() tag="" m=""
  if [ -n "${4:-}" ] && [ "$(nproc)" -ge 2 ]; then
    pin_server "$3"
    pin=(taskset -c 0) tag=" (server on CPU 1, dnsperf on CPU 0)" m="pinned "
  fi
  local t0 t1 try s0
  for try in $(seq 1 "$tries"); do
    t0=$(cputicks "$3") s0=$(steal)
    "${pin[@]}" dnsperf -s 127.0.0.1 -p "$2" -d "$work/hot" -l 5 -Q 20000 -c 8 -T 2 -t 5 -v 2>/dev/null |
      "${pin[@]}" awk '/^> /{print $NF}' >"$work/lat"
    t1=$(cputicks "$3")
    counts "$s0" 5 "$try" && break
  done
  [ -z "$tag" ] || unpin_server "$3"
  sort -g "$work/lat" | awk -v l="$1" -v t="$tag" -v m="$m" -v out="$work/results" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v st="$took" '{a[NR]=$1} END {if (NR==0) {print l": no samples"; exit}
    cpu = ticks / hz * 1e6 / NR
    printf "== %s: latency at 20000 QPS for 5 s%s (%d answers): p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, p99.9 %.3f ms; server CPU %.1f us a query; the host took %d ticks\n",
      l, t, NR, a[int(NR*0.5)]*1000, a[int(NR*0.9)]*1000, a[int(NR*0.99)]*1000, a[int(NR*0.999)]*1000, cpu, st
    printf "%s\t%sp50\t%.3f\n%s\t%sp90\t%.3f\n%s\t%sp99\t%.3f\n%s\t%scpu-us/q\t%.1f\n%s\t%slatency host ticks\t%d\n", l, m, a[int(NR*0.5)]*1000, l, m, a[int(NR*0.9)]*1000, l, m, a[int(NR*0.99)]*1000, l, m, cpu, l, m, st >>out}'
}
# binned LABEL PORT PID: one 1 s run at 20 000 QPS on shared cores, never
# repeated, its p99 and server CPU a query written to $work/binned with the
# steal the run suffered in thousandths of the CPUs' time. Where the host
# steals in most runs (docs/performance.md "Steal"), repeating runs until
# one is clean keeps few; comparing the servers' p99s over runs that lost
# the same share uses every run, and shows whether a server differs from
# the others at equal steal.
binned() {
  local t0 t1 s0
  t0=$(cputicks "$3") s0=$(steal)
  dnsperf -s 127.0.0.1 -p "$2" -d "$work/hot" -l 1 -Q 20000 -c 8 -T 2 -t 5 -v 2>/dev/null |
    awk '/^> /{print $NF}' >"$work/lat"
  t1=$(cputicks "$3")
  sort -g "$work/lat" | awk -v l="$1" -v st=$(($(steal) - s0)) -v all=$((cpus * $(getconf CLK_TCK))) \
    -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v out="$work/binned" '{a[NR]=$1} END {if (NR) \
    printf "%s\t%d\t%.3f\t%.1f\n", l, st * 1000 / all, a[int(NR*0.99)]*1000, ticks / hz * 1e6 / NR >>out}'
}
# Rounds interleave the servers, so a slower moment of a shared machine
# falls on each of them rather than on one, and each round starts each
# phase with the next server, so none is always the first to run after the
# previous phase's load (nxdns was, until the eighth pass).
# PHASES picks the phases a round runs (default all four), so many rounds
# of one figure fit in the time that settles it on a noisy host.
phase() { [[ "$phases" == *" $1 "* ]]; }
all=("nxdns:$nx:$nxpid" "dnsdist (packet cache):$dd:$ddpid" "unbound:$ub:$ubpid" "go floor:$fl:$flpid")
for round in $(seq 1 "$rounds"); do
  echo "== round $round of $rounds"
  r=$(((round - 1) % ${#all[@]}))
  servers=("${all[@]:r}" "${all[@]:0:r}")
  for s in "${servers[@]}"; do IFS=: read -r l p _ <<<"$s"; phase throughput && measure "$l" "$p"; done
  for s in "${servers[@]}"; do IFS=: read -r l p pid <<<"$s"; phase latency && percentiles "$l" "$p" "$pid"; done
  for s in "${servers[@]}"; do IFS=: read -r l p pid <<<"$s"; phase pinned-throughput && measure "$l" "$p" "$pid"; done
  for s in "${servers[@]}"; do IFS=: read -r l p pid <<<"$s"; phase pinned-latency && percentiles "$l" "$p" "$pid" pinned; done
  for s in "${servers[@]}"; do IFS=: read -r l p pid <<<"$s"; phase steal-binned && binned "$l" "$p" "$pid"; done
done
if [ -s "$work/binned" ]; then
  echo "== p99 at 20000 QPS in 1 s runs on shared cores, by the steal a run suffered (thousandths of the CPUs' time): runs, their median p99 and the middle half of them, median server CPU a query"
  awk -F'\t' '{b = $2 <= 5 ? "1\t0-5" : $2 <= 20 ? "2\t6-20" : $2 <= 75 ? "3\t21-75" : $2 <= 200 ? "4\t76-200" : "5\t>200"
    print $1 "\t" b "\t" $3 "\t" $4}' "$work/binned" | sort -t$'\t' -k1,1 -k2,2n -k4,4g | cut -f1,3- | awk -F'\t' '
    { k = $1 "\t" $2; p[k, ++n[k]] = $3; c[k, n[k]] = $4; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    END { for (i = 1; i <= m; i++) { k = order[i]; split(k, f, "\t"); r = n[k]
      for (j = 1; j <= r; j++) cs[j] = c[k, j]
      for (j = 2; j <= r; j++) { x = cs[j]; for (h = j - 1; h >= 1 && cs[h] > x; h--) cs[h + 1] = cs[h]; cs[h + 1] = x }
      mp = (r % 2) ? p[k, (r + 1) / 2] : (p[k, r / 2] + p[k, r / 2 + 1]) / 2
      mc = (r % 2) ? cs[(r + 1) / 2] : (cs[r / 2] + cs[r / 2 + 1]) / 2
      printf "   %-24s steal %-7s %3d runs  p99 %.3f ms (middle half %.3f-%.3f)  CPU %.1f us\n", f[1], f[2], r, mp,
        p[k, int((r + 3) / 4)], p[k, int((3 * r + 3) / 4)], mc } }'
fi
# The median of each figure over the rounds: one slow moment of the shared
# machine moves a round's figure, not the median.
if [ -s "$work/results" ]; then # not when PHASES is steal-binned alone
  echo "== medians over $rounds rounds (QPS; latency in ms and server CPU in us a query at 20000 QPS; ticks the host took from a run)"
  sort -t$'\t' -k1,1 -k2,2 -k3,3g "$work/results" | awk -F'\t' '
    { k = $1 "\t" $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    END { for (i = 1; i <= m; i++) { k = order[i]; split(k, f, "\t"); c = n[k]
      med = (c % 2) ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2
      printf "   %-24s %-25s %s\n", f[1], f[2], med } }'
  echo "   runs repeated because the host took the CPUs: $repeated; runs kept after $tries tries although it did: $kept_stolen"
fi
echo "== nxdns cache series after the runs"
curl -fsS "http://127.0.0.1:$web/metrics" | grep -E '^nxdns_cache_(hits|misses|coalesced)_total|^nxdns_cache_entries'

# Memory per entry: RSS with N unique names cached, from nxdns's own
# process_resident_memory_bytes (after a GC would be kinder; this is what an
# operator sees).
rss() { curl -fsS "http://127.0.0.1:$web/metrics" | awk '/^process_resident_memory_bytes/{printf "%d", $2}'; }
heap() { curl -fsS "http://127.0.0.1:$web/metrics" | awk '/^go_memstats_heap_inuse_bytes/{printf "%d", $2}'; }
entries() { curl -fsS "http://127.0.0.1:$web/metrics" | awk '/^nxdns_cache_entries/{printf "%d", $2}'; }
fill() { # count
  prefix=$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')
  for i in $(seq 1 "$1"); do echo "m$prefix-$i.fill.test A"; done >"$work/fill"
  dnsperf -s 127.0.0.1 -p "$nx" -d "$work/fill" -n 1 -c 8 -T 2 -q 100 -t 5 >/dev/null 2>&1
}
curl -fsS -X POST "http://127.0.0.1:$web/api/cache/flush" >/dev/null
r0=$(rss); h0=$(heap); e0=$(entries)
fill 10000; r1=$(rss); h1=$(heap); e1=$(entries)
fill 90000; r2=$(rss); h2=$(heap); e2=$(entries)
echo "== nxdns memory: RSS $((r0 >> 20)) MiB at $e0 entries, $((r1 >> 20)) MiB at $e1, $((r2 >> 20)) MiB at $e2"
echo "   Go heap in use $((h0 >> 20)) MiB, $((h1 >> 20)) MiB, $((h2 >> 20)) MiB"
echo "   per entry from 0 to $e2: RSS $(( (r2 - r0) / (e2 > e0 ? e2 - e0 : 1) )) bytes, heap in use $(( (h2 - h0) / (e2 > e0 ? e2 - e0 : 1) )) bytes"
