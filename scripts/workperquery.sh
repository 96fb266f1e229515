#!/usr/bin/env bash
# Work per query: how much a cache hit and a cache miss cost nxdns and its
# peers (Unbound, dnsdist, Knot Resolver), each forwarding over DoT to the
# same fake upstream (nxdns-fakeup), each asked by the same load generator
# (dnsperf) at the same fixed, modest rate, in one run. Prints one markdown
# table (docs/performance.md "Work per query").
#
# Two figures per query:
#   instructions  counted by valgrind's callgrind (an instruction counter of
#                 the program's own code, user space only). The count does
#                 not depend on the host's scheduling, its CPU steal, the
#                 other jobs on the machine or the clock speed: two runs on
#                 a shared VM agree within about ten per cent (a Go
#                 runtime's own work varies with timing), where latencies
#                 and CPU times move by more. It leaves out the kernel's
#                 share (the socket calls), and valgrind runs the threads
#                 one at a time, so it does not see what waking threads
#                 across CPUs costs: the CPU time below does.
#                 Counting starts after the warm-up (--instr-atstart=no,
#                 then callgrind_control -i on) and each window's count is
#                 zeroed at its start and dumped at its end; the count of an
#                 idle window of the same server, per second, times the
#                 window's length, is subtracted, so timers and health
#                 checks are not charged to the queries.
#   CPU time      utime + stime from /proc/PID/stat (every thread, kernel
#                 included) over the answered queries at a fixed rate,
#                 without valgrind, less the idle rate; ticks of 1/CLK_TCK
#                 s, so the window is long enough for a few hundred ticks.
#
# Hits: HIT_NAMES names asked over and over after a warm-up that cached
# them. Misses: unique names, each forwarded to the upstream over the DoT
# connection the warm-up opened. Go programs run under valgrind with
# GODEBUG=cpu.rdtscp=off (valgrind 3.19 does not decode RDTSCP) and
# asyncpreemptoff=1 (callgrind asserts on the preemption signal); the Go
# code counted is the same.
#
# Usage: scripts/workperquery.sh [TARGETS]  (default "nxdns unbound dnsdist kresd")
#   BASE=<git revision>  adds the row "nxdns@BASE", that commit's nxdns,
#                        built from `git archive` (the before of a change);
#                        several revisions, space-separated, add a row each
#   HITS=2000 MISSES=500 HIT_QPS=200 MISS_QPS=50  the callgrind windows
#   CPU_SECONDS=10 CPU_HIT_QPS=2000 CPU_MISS_QPS=200  the CPU-time windows
#   ROUNDS=1             rounds of every target in turn, a row each (ranges
#                        over interleaved rounds, not one lucky run)
#   PROFILE=<dir>        keeps each target's callgrind dumps of the hit and
#                        miss windows there (callgrind_annotate DIR/nxdns.r1.misses)
#   NXDNS_EXTRA='[filter] ...'  TOML appended to nxdns's configuration (a
#                        feature on against off: run twice); @UPSTREAM@ in it
#                        is the fake upstream's URL (a group's own pool)
#   NXDNS_DNS='rate_limit_qps = 0'  lines added to nxdns's [dns] table
# A target "nxdns+doq" (or "nxdns@REV+doq") is that nxdns forwarding to the
# same fake upstream over DoQ (quic://) instead of DoT: "nxdns nxdns+doq"
# puts the two side by side (scripts/perf-doq.sh has the rest of issue 37's
# DoQ-against-DoT figures).
# Debian packages: valgrind, dnsperf, knot-dnsutils, unbound, dnsdist,
# knot-resolver. Everything stays on 127.0.0.1; every load is bounded in
# count and time.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=${1:-"nxdns unbound dnsdist kresd"}
HITS=${HITS:-2000} MISSES=${MISSES:-500} HIT_QPS=${HIT_QPS:-200} MISS_QPS=${MISS_QPS:-50}
CPU_SECONDS=${CPU_SECONDS:-10} CPU_HIT_QPS=${CPU_HIT_QPS:-2000} CPU_MISS_QPS=${CPU_MISS_QPS:-200}
IDLE_SECONDS=${IDLE_SECONDS:-5} HIT_NAMES=10 ROUNDS=${ROUNDS:-1}
for tool in valgrind callgrind_control dnsperf kdig; do
  command -v "$tool" >/dev/null || { echo "$tool not installed (apt-get install valgrind dnsperf knot-dnsutils)" >&2; exit 1; }
done

. scripts/lib.sh
bench_init
bench_build nxdns nxdns-fakeup
for rev in ${BASE:-}; do
  mkdir "$work/base-$rev"
  git archive "$rev" | tar -x -C "$work/base-$rev"
  (cd "$work/base-$rev" && CGO_ENABLED=0 go build -trimpath -o "$work/nxdns@$rev" ./cmd/nxdns)
  bases="${bases:-}nxdns@$rev "
done
targets="${bases:-}$targets"
tck=$(getconf CLK_TCK)
port=$(( 20000 + RANDOM % 20000 ))

# The fake upstream, shared by every target: answers never expire during
# the run (a prefetch or a refresh would be a miss inside the hit window).
up=$((port += 1)) uphttp=$((port += 1))
bench_fakeup "$uphttp" -listen "dot://127.0.0.1:$up" -listen "doq://127.0.0.1:$up" -cert-names upstream.test -ttl 86400

# Query files: the hit names, repeated; unique miss names, one set per
# window so no window meets a name an earlier one cached.
for i in $(seq 1 "$HITS"); do echo "h$((i % HIT_NAMES)).hit.example A"; done >"$work/hits"
names() { for i in $(seq 1 "$2"); do echo "m$i.$1.miss.example A"; done; }

# start NAME DNSPORT VALGRIND(0|1): starts one server, its PID in $pid;
# fails if it does not answer within 120 s.
start() {
  local name=$1 dns=$2 vg=$3 dir="$work/$1-$2" pre=()
  mkdir -p "$dir"
  if [ "$vg" = 1 ]; then
    pre=(env GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" --log-file="$dir/valgrind.log")
  fi
  case $name in
  nxdns*)
    local bin=${name%+doq} scheme=tls
    [ "$bin" = "$name" ] || scheme=quic
    {
      printf '[dns]\nlisten = ["127.0.0.1:%s"]\n%s\n[web]\nlisten = ""\n[log]\nqueries = false\n' "$dns" "${NXDNS_DNS:-}"
      bench_upstream "$up" "$scheme"
      local extra=${NXDNS_EXTRA:-}
      printf '%s\n' "${extra//@UPSTREAM@/$scheme://127.0.0.1:$up}"
    } >"$dir/nxdns.toml"
    "${pre[@]}" "$work/$bin" run --config "$dir/nxdns.toml" 2>"$dir/log" &
    ;;
  unbound)
    cat >"$dir/unbound.conf" <<EOF
server:
  interface: 127.0.0.1
  port: $dns
  do-daemonize: no
  use-syslog: no
  logfile: ""
  username: ""
  chroot: ""
  pidfile: ""
  directory: "$dir"
  do-not-query-localhost: no
  module-config: "iterator"
  qname-minimisation: no
  tls-cert-bundle: "$work/ca.pem"
forward-zone:
  name: "."
  forward-tls-upstream: yes
  forward-addr: 127.0.0.1@$up#upstream.test
EOF
    "${pre[@]}" unbound -d -c "$dir/unbound.conf" >"$dir/log" 2>&1 &
    ;;
  dnsdist)
    cat >"$dir/dnsdist.conf" <<EOF
setLocal("127.0.0.1:$dns")
setSecurityPollSuffix("")
newServer({address="127.0.0.1:$up", tls="openssl", subjectName="upstream.test", caStore="$work/ca.pem", validateCertificates=true})
pc = newPacketCache(10000, {maxTTL=86400})
getPool(""):setCache(pc)
EOF
    "${pre[@]}" dnsdist --supervised --disable-syslog -C "$dir/dnsdist.conf" >"$dir/log" 2>&1 &
    ;;
  kresd)
    cat >"$dir/kresd.conf" <<EOF
net.listen('127.0.0.1', $dns, { kind = 'dns' })
cache.size = 10 * MB
trust_anchors.remove('.')
policy.add(policy.all(policy.TLS_FORWARD({{'127.0.0.1@$up', hostname = 'upstream.test', ca_file = '$work/ca.pem'}})))
EOF
    "${pre[@]}" kresd -n -c "$dir/kresd.conf" "$dir" >"$dir/log" 2>&1 &
    ;;
  *) echo "unknown target $name" >&2; exit 1 ;;
  esac
  pid=$!
  pids+=("$pid")
  # Ready once it answers a query (valgrind starts slowly: 120 s at most).
  for _ in $(seq 1 240); do
    kdig @127.0.0.1 -p "$dns" +timeout=1 +retry=0 ready.example A >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  echo "$name does not answer on 127.0.0.1:$dns; its log:" >&2
  tail -20 "$dir/log" "$dir/valgrind.log" >&2 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  return 1
}

# launch NAME VALGRIND: start on a fresh port, a second time if the first
# start does not answer (a loaded machine, valgrind's slow start); sets
# $dns and $dir.
launch() {
  dns=$((port += 1))
  start "$1" "$dns" "$2" || { dns=$((port += 1)); start "$1" "$dns" "$2"; } || exit 1
  dir="$work/$1-$dns"
}

stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }

# warm DNSPORT: the hit names cached (asked three times: nxdns answers from
# the wire once the general path has answered a hit) and the DoT
# connection open.
warm() {
  local i
  for _ in 1 2 3; do
    for i in $(seq 0 $((HIT_NAMES - 1))); do kdig @127.0.0.1 -p "$1" +timeout=5 +retry=0 "h$i.hit.example" A >/dev/null || true; done
  done
  names "warm$1" 20 >"$work/warm"
  dnsperf -s 127.0.0.1 -p "$1" -d "$work/warm" -n 1 -Q 5 -t 10 >/dev/null 2>&1 || true
}

# perf DNSPORT FILE QPS SECONDS REPEAT: dnsperf at a fixed rate; sets
# $completed and $runtime.
perf() {
  local out
  out=$(dnsperf -s 127.0.0.1 -p "$1" -d "$2" -Q "$3" -l "$4" -n "$5" -t 5 2>&1 || true)
  completed=$(awk '/Queries completed:/ {print $3}' <<<"$out")
  runtime=$(awk '/Run time \(s\):/ {print $4}' <<<"$out")
  completed=${completed:-0} runtime=${runtime:-0}
}

# dumped DIR LABEL: the instruction count of the dump named LABEL.
dumped() {
  local f
  for _ in $(seq 1 100); do
    f=$(grep -l "^desc: Trigger: .*dump $2\$" "$1"/cg.out.* 2>/dev/null | head -1 || true)
    [ -n "$f" ] && grep -q '^totals:' "$f" && { awk '/^totals:/ {print $2}' "$f"; return; }
    sleep 0.2
  done
  echo 0
}

# cg ARGS...: a callgrind_control command to the server under valgrind.
cg() { callgrind_control "$@" "$pid" >/dev/null 2>&1; }

# cpu_ticks: utime + stime of $pid, every thread.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
# user_ticks: utime alone. The miss's user share is printed beside its
# total: the kernel's share (the socket calls) is alike across servers, and
# a Go program's scheduler (threads spinning for work after each hand-off
# between goroutines) shows in the user share (docs/decisions/miss-path-ownership.md).
user_ticks() { awk '{print $14}' "/proc/$pid/stat"; }

declare -A cell
for round in $(seq 1 "$ROUNDS"); do
  for t in $targets; do
    k=$round:$t
    echo "measuring $t (round $round of $ROUNDS)" >&2
    # Instructions, under callgrind.
    launch "$t" 1
    warm "$dns"
    cg -i on
    cg -z
    sleep "$IDLE_SECONDS"
    cg -d idle
    idle=$(dumped "$dir" idle)
    cg -z
    perf "$dns" "$work/hits" "$HIT_QPS" $((HITS / HIT_QPS + 10)) 1
    cg -d hits
    cell[$k,hitn]=$completed
    cell[$k,hiti]=$(awk -v i="$(dumped "$dir" hits)" -v idle="$idle" -v s="$IDLE_SECONDS" -v r="$runtime" -v n="$completed" 'BEGIN{ if (n > 0) printf "%.0f", (i - idle / s * r) / n; else print "-" }')
    names "cg$dns" "$MISSES" >"$work/miss"
    cg -z
    perf "$dns" "$work/miss" "$MISS_QPS" $((MISSES / MISS_QPS + 10)) 1
    cg -d misses
    cell[$k,missn]=$completed
    cell[$k,missi]=$(awk -v i="$(dumped "$dir" misses)" -v idle="$idle" -v s="$IDLE_SECONDS" -v r="$runtime" -v n="$completed" 'BEGIN{ if (n > 0) printf "%.0f", (i - idle / s * r) / n; else print "-" }')
    stop
    if [ -n "${PROFILE:-}" ]; then
      mkdir -p "$PROFILE"
      for w in hits misses; do
        f=$(grep -l "^desc: Trigger: .*dump $w\$" "$dir"/cg.out.* 2>/dev/null | head -1 || true)
        [ -n "$f" ] && cp "$f" "$PROFILE/$t.r$round.$w"
      done
    fi

    # CPU time, natively.
    launch "$t" 0
    warm "$dns"
    c0=$(cpu_ticks)
    sleep "$IDLE_SECONDS"
    idle=$(( $(cpu_ticks) - c0 ))
    c0=$(cpu_ticks)
    perf "$dns" "$work/hits" "$CPU_HIT_QPS" "$CPU_SECONDS" 1000000
    cell[$k,hitc]=$(awk -v d=$(( $(cpu_ticks) - c0 )) -v idle="$idle" -v s="$IDLE_SECONDS" -v r="$runtime" -v n="$completed" -v tck="$tck" 'BEGIN{ if (n > 0) printf "%.1f", (d - idle / s * r) / tck * 1e6 / n; else print "-" }')
    names "cpu$dns" $((CPU_MISS_QPS * CPU_SECONDS)) >"$work/miss"
    c0=$(cpu_ticks) u0=$(user_ticks)
    perf "$dns" "$work/miss" "$CPU_MISS_QPS" $((CPU_SECONDS + 5)) 1
    cell[$k,missu]=$(awk -v d=$(( $(user_ticks) - u0 )) -v n="$completed" -v tck="$tck" 'BEGIN{ if (n > 0) printf "%.1f", d / tck * 1e6 / n; else print "-" }')
    cell[$k,missc]=$(awk -v d=$(( $(cpu_ticks) - c0 )) -v idle="$idle" -v s="$IDLE_SECONDS" -v r="$runtime" -v n="$completed" -v tck="$tck" 'BEGIN{ if (n > 0) printf "%.1f", (d - idle / s * r) / tck * 1e6 / n; else print "-" }')
    stop
  done
done

# ratio K KEY PEER: K's figure over PEER's (same round), when both were
# measured.
ratio() {
  awk -v a="${cell[$1,$2]:-}" -v b="${cell[${1%%:*}:$3,$2]:-}" 'BEGIN{ if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'
}

echo "| round | server | hit: instructions/query | miss: instructions/query | hit: CPU µs/query | miss: CPU µs/query | miss: of it user µs | hit instr. ÷ Unbound, ÷ dnsdist | miss instr. ÷ Unbound, ÷ dnsdist, ÷ kresd | miss CPU ÷ kresd | miss user ÷ kresd |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for t in $targets; do
    k=$round:$t
    printf '| %s | %s | %s (%s answered) | %s (%s answered) | %s | %s | %s | %s, %s | %s, %s, %s | %s | %s |\n' "$round" "$t" \
      "${cell[$k,hiti]}" "${cell[$k,hitn]}" "${cell[$k,missi]}" "${cell[$k,missn]}" \
      "${cell[$k,hitc]}" "${cell[$k,missc]}" "${cell[$k,missu]}" \
      "$(ratio "$k" hiti unbound)" "$(ratio "$k" hiti dnsdist)" \
      "$(ratio "$k" missi unbound)" "$(ratio "$k" missi dnsdist)" "$(ratio "$k" missi kresd)" "$(ratio "$k" missc kresd)" "$(ratio "$k" missu kresd)"
  done
done
echo
echo "callgrind: $HITS hits at $HIT_QPS/s, $MISSES misses at $MISS_QPS/s; CPU time: hits at $CPU_HIT_QPS/s and misses at $CPU_MISS_QPS/s for ${CPU_SECONDS} s; $ROUNDS round(s), targets in turn; $(nproc) CPUs, $(uname -m)"
