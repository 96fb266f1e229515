#!/usr/bin/env bash
# DoQ beside DoT (issue 37): what a query costs nxdns over DNS over QUIC
# against DNS over TLS, both directions, in one run (docs/performance.md
# "DoQ beside DoT"). Prints one markdown table.
#
#   upstream side  nxdns forwards unique names (misses) to one fake upstream
#                  (nxdns-fakeup, dot and doq listeners on the same port
#                  number) over tls:// in one server, over quic:// in
#                  another, asked by dnsperf over UDP:
#                  - CPU µs and context switches per miss at MISS_QPS for
#                    CPU_SECONDS;
#                  - miss throughput: dnsperf unthrottled for TPUT_SECONDS
#                    (8 clients, 256 outstanding, as scripts/compare.sh),
#                    with the CPU µs per answered miss at that load.
#   served side    one nxdns serving [tls] dot_listen and doq_listen on the
#                  same port number, its HIT_NAMES names cached; nxdns-burst
#                  asks each at HIT_QPS for CPU_SECONDS over one connection
#                  (-proto dot: queries pipelined; -proto doq: a stream per
#                  query): CPU µs and context switches per served hit, and
#                  the client's own CPU.
#
# CPU time is the server process's utime + stime from /proc/PID/stat (every
# thread, the kernel's share included) over the queries it answered, less
# its idle rate (an IDLE_SECONDS window after the warm-up), as
# scripts/workperquery.sh measures; context switches likewise, from
# /proc/PID/task/*/status. ROUNDS rounds, DoT and DoQ interleaved,
# the first of each pair alternating, so the table shows ranges over rounds
# of one run: on a shared machine compare the columns of one run only.
#
# Usage: scripts/perf-doq.sh
#   ROUNDS=3 CPU_SECONDS=10 IDLE_SECONDS=5 MISS_QPS=200 HIT_QPS=2000 TPUT_SECONDS=10
#   PROFILE=<dir>  also samples nxdns with `perf record -g` (499 Hz) over the
#                  fixed-rate windows of round 1, into DIR/{up,served}-PROTO.data
#                  (perf report -i DIR/served-doq.data --no-children); the
#                  sampling costs a little CPU of its own, so take the table
#                  from a run without it
# Debian packages: dnsperf, knot-dnsutils, openssl, jq. Everything stays on
# 127.0.0.1; every load is bounded in count and time.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3} CPU_SECONDS=${CPU_SECONDS:-10} IDLE_SECONDS=${IDLE_SECONDS:-5}
MISS_QPS=${MISS_QPS:-200} HIT_QPS=${HIT_QPS:-2000} TPUT_SECONDS=${TPUT_SECONDS:-10} HIT_NAMES=10
for tool in dnsperf kdig openssl jq ${PROFILE:+perf}; do
  command -v "$tool" >/dev/null || { echo "$tool not installed (apt-get install dnsperf knot-dnsutils openssl jq)" >&2; exit 1; }
done

. scripts/lib.sh
bench_init
bench_build nxdns nxdns-fakeup nxdns-burst
tck=$(getconf CLK_TCK)
port=$(( 20000 + RANDOM % 20000 ))

# The fake upstream: DoT on TCP and DoQ on UDP, the same port number;
# answers never expire during the run.
up=$((port += 1)) uphttp=$((port += 1))
bench_fakeup "$uphttp" -listen "dot://127.0.0.1:$up" -listen "doq://127.0.0.1:$up" -cert-names upstream.test -ttl 86400

# The served certificate: self-signed for dns.test, the client's only root.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=dns.test \
  -addext subjectAltName=DNS:dns.test -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

# start PROTO DIR: nxdns forwarding over PROTO (dot: tls://, doq: quic://)
# and serving DoT and DoQ on $tlsport; its PID in $pid, its UDP port $dns.
start() {
  local scheme=tls
  [ "$1" = doq ] && scheme=quic
  dns=$((port += 1)) tlsport=$((port += 1))
  mkdir -p "$2"
  cat >"$2/nxdns.toml" <<EOF
[dns]
listen = ["127.0.0.1:$dns"]
rate_limit_qps = 0
[web]
listen = ""
[log]
queries = false
[tls]
cert_file = "$work/cert.pem"
key_file = "$work/key.pem"
dot_listen = ["127.0.0.1:$tlsport"]
doq_listen = ["127.0.0.1:$tlsport"]
$(bench_upstream "$up" "$scheme")
EOF
  "$work/nxdns" run --config "$2/nxdns.toml" 2>"$2/log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 100); do
    kdig @127.0.0.1 -p "$dns" +timeout=1 +retry=0 ready.example A >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.3
  done
  echo "nxdns does not answer on 127.0.0.1:$dns; its log:" >&2
  tail -20 "$2/log" >&2
  exit 1
}

stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# switches: the server's context switches, voluntary and not, summed over
# its threads (Go keeps its threads for the process's life): each is a
# thread put to sleep or woken, the cost that dominates these profiles.
switches() { cat /proc/"$pid"/task/*/status 2>/dev/null | awk '/ctxt_switches/ { s += $2 } END { print s + 0 }'; }

# profile NAME ROUND SECONDS: with PROFILE set, in round 1, samples $pid
# for SECONDS in the background into $PROFILE/NAME.data; $perfpid waits.
profile() {
  perfpid=""
  [ -n "${PROFILE:-}" ] && [ "$2" = 1 ] || return 0
  mkdir -p "$PROFILE"
  perf record -q -F 499 -g -p "$pid" -o "$PROFILE/$1.data" -- sleep "$3" >/dev/null 2>&1 &
  perfpid=$!
}
profiled() { [ -z "$perfpid" ] || wait "$perfpid" || true; }

# names PREFIX N: N unique miss names.
names() { awk -v p="$1" -v n="$2" 'BEGIN { for (i = 1; i <= n; i++) printf "%s-%d.miss.example A\n", p, i }'; }

# idle: the server's CPU ticks over IDLE_SECONDS, after a warm-up that
# cached the hit names (asked three times) and opened the upstream
# connection (20 misses).
idle() {
  local i c0
  for _ in 1 2 3; do
    for i in $(seq 0 $((HIT_NAMES - 1))); do kdig @127.0.0.1 -p "$dns" +timeout=5 +retry=0 "h$i.hit.example" A >/dev/null || true; done
  done
  for i in $(seq 1 20); do echo "w$i.warm$dns.miss.example A"; done >"$work/warm"
  dnsperf -s 127.0.0.1 -p "$dns" -d "$work/warm" -n 1 -Q 5 -t 10 >/dev/null 2>&1 || true
  c0=$(cpu_ticks) s0=$(switches)
  sleep "$IDLE_SECONDS"
  idle_ticks=$(( $(cpu_ticks) - c0 )) idle_switches=$(( $(switches) - s0 ))
}

# per_query TICKS SECONDS N: µs of CPU per query, the idle rate taken out.
per_query() { per "$1" "$idle_ticks" "$2" "$3" "1e6 / $tck"; }

# switches_per_query SWITCHES SECONDS N: context switches per query, the
# idle rate taken out.
switches_per_query() { per "$1" "$idle_switches" "$2" "$3" 1; }

# per D IDLE SECONDS N SCALE: (D − IDLE's rate × SECONDS) × SCALE ÷ N.
per() {
  awk -v d="$1" -v idle="$2" -v s="$IDLE_SECONDS" -v r="$3" -v n="$4" "BEGIN{ k = $5
    if (n > 0) printf \"%.1f\", (d - idle / s * r) * k / n; else print \"-\" }"
}

# dnsperf_run ARGS...: dnsperf at 127.0.0.1:$dns; sets $completed, $runtime,
# $dqps and $ticks (the server's CPU over the run).
dnsperf_run() {
  local out c0 s0
  c0=$(cpu_ticks) s0=$(switches)
  out=$(dnsperf -s 127.0.0.1 -p "$dns" "$@" 2>&1 || true)
  ticks=$(( $(cpu_ticks) - c0 )) nswitches=$(( $(switches) - s0 ))
  completed=$(awk '/Queries completed:/ {print $3}' <<<"$out")
  runtime=$(awk '/Run time \(s\):/ {print $4}' <<<"$out")
  dqps=$(awk '/Queries per second/ {printf "%.0f", $4}' <<<"$out")
  lost=$(awk '/Queries lost:/ {print $4}' <<<"$out" | tr -d '()')
  completed=${completed:-0} runtime=${runtime:-0} dqps=${dqps:-0} lost=${lost:-?}
}

# upstream PROTO ROUND: the miss columns of nxdns forwarding over PROTO.
upstream() {
  local k=$2:$1 prefix
  start "$1" "$work/up-$1-$2"
  idle
  prefix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
  names "c$prefix" $((MISS_QPS * CPU_SECONDS)) >"$work/miss"
  profile "up-$1" "$2" "$CPU_SECONDS"
  dnsperf_run -d "$work/miss" -Q "$MISS_QPS" -l $((CPU_SECONDS + 5)) -n 1 -t 5
  profiled
  cell[$k,miss]=$(per_query "$ticks" "$runtime" "$completed")
  cell[$k,misscs]=$(switches_per_query "$nswitches" "$runtime" "$completed")
  names "t$prefix" 300000 >"$work/miss"
  dnsperf_run -d "$work/miss" -l "$TPUT_SECONDS" -c 8 -T 2 -q 256 -t 5 -S 0
  cell[$k,qps]="$dqps (lost $lost)"
  cell[$k,qpscpu]=$(per_query "$ticks" "$runtime" "$completed")
  stop
}

# served PROTO ROUND: the hit columns of nxdns serving over PROTO, asked by
# nxdns-burst on one connection; also the client's own CPU per query.
served() {
  local k=$2:$1 out c0 s0 rep answered wall
  profile "served-$1" "$2" "$CPU_SECONDS"
  c0=$(cpu_ticks) s0=$(switches)
  # `times` in the $(…) subshell: its second line is nxdns-burst's CPU.
  out=$("$work/nxdns-burst" -target "127.0.0.1:$tlsport" -proto "$1" -ca-file "$work/cert.pem" -tls-name dns.test \
    -suffix hit.example -distinct "$HIT_NAMES" -rate "$HIT_QPS" -duration "${CPU_SECONDS}s" -baseline 0 -timeout 2s 2>/dev/null; times)
  ticks=$(( $(cpu_ticks) - c0 )) nswitches=$(( $(switches) - s0 ))
  profiled
  rep=$(head -1 <<<"$out")
  [[ $rep == "{"* ]] || { echo "nxdns-burst -proto $1 failed" >&2; return 0; }
  answered=$(jq -r '.rcodes.NOERROR // 0' <<<"$rep")
  wall=$(jq -r '.wall_ms / 1000' <<<"$rep")
  cell[$k,hit]=$(per_query "$ticks" "$wall" "$answered")
  cell[$k,hitcs]=$(switches_per_query "$nswitches" "$wall" "$answered")
  cell[$k,hitn]="$answered of $(jq -r .queries <<<"$rep")"
  cell[$k,client]=$(tail -1 <<<"$out" | awk -v n="$answered" '{
    split($1, u, /[ms]/); split($2, s, /[ms]/)
    if (n > 0) printf "%.1f", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1e6 / n; else print "-" }')
}

declare -A cell
for round in $(seq 1 "$ROUNDS"); do
  order="dot doq"
  [ $((round % 2)) = 0 ] && order="doq dot"
  for p in $order; do
    echo "round $round of $ROUNDS: upstream $p" >&2
    upstream "$p" "$round"
  done
  echo "round $round of $ROUNDS: served $order" >&2
  start dot "$work/served-$round"
  idle
  for p in $order; do served "$p" "$round"; done
  stop
done

# range KEY PROTO: "min–max" of a column over the rounds.
range() {
  local r v=()
  for r in $(seq 1 "$ROUNDS"); do v+=("${cell[$r:$2,$1]:--}"); done
  printf '%s\n' "${v[@]}" | awk '$1 != "-" { if (n == 0 || $1 < lo) lo = $1; if (n == 0 || $1 > hi) hi = $1; n++ }
    END { if (n == 0) print "-"; else if (lo == hi) print lo; else printf "%s–%s\n", lo, hi }'
}

echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'), nxdns $(git describe --always --dirty 2>/dev/null || echo '?'), $(nproc) CPUs, $(uname -m), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | proto | upstream: CPU µs/miss at $MISS_QPS/s | upstream: switches/miss | upstream: misses/s unthrottled | upstream: CPU µs/miss unthrottled | served: CPU µs/hit at $HIT_QPS/s (answered) | served: switches/hit | served: client CPU µs/query |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  for p in dot doq; do
    k=$round:$p
    printf '| %s | %s | %s | %s | %s | %s | %s (%s) | %s | %s |\n' "$round" "$p" "${cell[$k,miss]}" "${cell[$k,misscs]}" "${cell[$k,qps]}" \
      "${cell[$k,qpscpu]}" "${cell[$k,hit]}" "${cell[$k,hitn]}" "${cell[$k,hitcs]}" "${cell[$k,client]}"
  done
done
for p in dot doq; do
  printf '| range | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$p" "$(range miss "$p")" "$(range misscs "$p")" "$(range qps "$p")" \
    "$(range qpscpu "$p")" "$(range hit "$p")" "$(range hitcs "$p")" "$(range client "$p")"
done
echo
echo "misses at $MISS_QPS/s and hits at $HIT_QPS/s for $CPU_SECONDS s, idle rate over $IDLE_SECONDS s taken out; throughput: dnsperf -c 8 -q 256 for $TPUT_SECONDS s; $ROUNDS rounds, DoT and DoQ interleaved"
