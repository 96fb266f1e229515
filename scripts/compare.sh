#!/usr/bin/env bash
# Peer comparison: the same loads against nxdns, dnsdist and knot-resolver
# (kresd), each started on loopback by this script and stopped by PID, each
# forwarding over DoT to the same fake upstreams (nxdns-fakeup) through the
# same emulated path (nxdns-pathemu). Prints one table (markdown).
#
#   burst       30 unique names at once, upstream 20 ms of path away and 40 ms
#               to answer; ratio = wall ÷ one warm query (best of 3 runs)
#   saturated   primary stalls, standby answers in 5 ms, 30 ms of path: 42
#               queries fill the primary, then 300 at once; lost and p99 of
#               the 300
#   all-stall   every upstream stalls: 10 queries; answered (with what) and
#               when, against a client that waits 6 s
#   throughput  dnsperf, 10 s, 8 clients, 256 outstanding, unique names,
#               zero-latency upstream without path emulation (CPU-bound);
#               p99 from a fixed 5000 QPS for 5 s
#
# Debian packages: dnsdist, knot-resolver, dnsperf, jq. Every load is bounded
# in count and time; everything stays on 127.0.0.1.
# Usage: scripts/compare.sh [TARGETS]   (default "nxdns dnsdist kresd")
#   NXDNS_EXTRA=$'[dnssec]\nmode = "off"'  TOML appended to nxdns's configuration (a feature off against on)
set -euo pipefail
cd "$(dirname "$0")/.."
targets=${1:-"nxdns dnsdist kresd"}
for tool in dnsdist kresd dnsperf jq; do
  command -v "$tool" >/dev/null || { echo "$tool not installed (apt-get install dnsdist knot-resolver dnsperf jq)" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

. scripts/lib.sh # bench_build: the binaries as the packages build them
bench_build nxdns nxdns-fakeup nxdns-pathemu nxdns-burst

port=$(( 20000 + RANDOM % 20000 )) # the last port handed out; bumped in this shell, never in a $(…)

# wait_tcp PORT: until something listens there (at most 10 s).
wait_tcp() {
  for _ in $(seq 1 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  echo "nothing listens on 127.0.0.1:$1" >&2
  return 1
}

# upstream VAR QUERY RTT: a fake DoT upstream (listen query, e.g.
# "latency=5ms") behind a relay adding RTT (0: none); VAR gets the port to
# connect to. Runs in this shell, so the PIDs are kept for stop_all.
upstream() {
  local up=$((port + 1)) http=$((port + 2)) relay=$((port + 3))
  port=$relay
  local listen="dot://127.0.0.1:$up"
  [ -n "$2" ] && listen="$listen?$2"
  "$work/nxdns-fakeup" -listen "$listen" -ca-cert "$work/ca.pem" -ca-key "$work/ca.key" \
    -cert-names upstream.test -http "127.0.0.1:$http" >/dev/null 2>&1 &
  pids+=($!)
  wait_tcp "$up"
  if [ "$3" = 0 ]; then printf -v "$1" '%s' "$up"; return; fi
  "$work/nxdns-pathemu" -to "127.0.0.1:$up" -listen "127.0.0.1:$relay" -rtt "$3" -jitter 4ms >/dev/null &
  pids+=($!)
  wait_tcp "$relay"
  printf -v "$1" '%s' "$relay"
}

# target NAME DNSPORT UPSTREAMPORT...: start one forwarder over DoT to the
# given upstreams, in priority order.
target() {
  local name=$1 dns=$2; shift 2
  local dir="$work/$name-$dns"
  mkdir -p "$dir"
  case $name in
  nxdns)
    {
      printf '[dns]\nlisten = ["127.0.0.1:%s"]\n[web]\nlisten = ""\n[log]\nqueries = false\n' "$dns"
      local i=0
      for u in "$@"; do
        printf '[[upstreams]]\nurl = "tls://127.0.0.1:%s"\ntls_name = "upstream.test"\nca_file = "%s"\npriority = %d\n' "$u" "$work/ca.pem" "$i"
        i=$((i + 1))
      done
      printf '%s\n' "${NXDNS_EXTRA:-}"
    } >"$dir/nxdns.toml"
    "$work/nxdns" run --config "$dir/nxdns.toml" 2>"$dir/log" &
    ;;
  dnsdist)
    {
      printf 'setLocal("127.0.0.1:%s")\nsetSecurityPollSuffix("")\nsetServerPolicy(firstAvailable)\n' "$dns"
      local i=1
      for u in "$@"; do
        printf 'newServer({address="127.0.0.1:%s", tls="openssl", subjectName="upstream.test", caStore="%s", validateCertificates=true, order=%d})\n' "$u" "$work/ca.pem" "$i"
        i=$((i + 1))
      done
    } >"$dir/dnsdist.conf"
    dnsdist --supervised --disable-syslog -C "$dir/dnsdist.conf" >"$dir/log" 2>&1 &
    ;;
  kresd)
    {
      printf "net.listen('127.0.0.1', %s, { kind = 'dns' })\ncache.size = 10 * MB\ntrust_anchors.remove('.')\n" "$dns"
      printf "policy.add(policy.all(policy.TLS_FORWARD({\n"
      for u in "$@"; do
        printf "  {'127.0.0.1@%s', hostname = 'upstream.test', ca_file = '%s'},\n" "$u" "$work/ca.pem"
      done
      printf "})))\n"
    } >"$dir/kresd.conf"
    kresd -n -c "$dir/kresd.conf" "$dir" >"$dir/log" 2>&1 &
    ;;
  esac
  pids+=($!)
  wait_tcp "$dns"
}

burst() { "$work/nxdns-burst" -target "127.0.0.1:$1" "${@:2}" 2>/dev/null || true; }

# The CA, written once by the first fake upstream and reused by the others.
upstream ca_port "" 0
stop_all

declare -A cell
for t in $targets; do
  # burst
  upstream u "latency=40ms" 20ms; dns=$((++port)); target "$t" "$dns" "$u"
  burst "$dns" -n 1 -baseline 0 -timeout 3s >/dev/null # first connection
  best=""
  for _ in 1 2 3; do
    r=$(burst "$dns" -n 30 -baseline 5 -timeout 5s)
    ratio=$(jq -r '.staircase_ratio' <<<"$r")
    if [ -z "$best" ] || awk "BEGIN{exit !($ratio < $(jq -r .staircase_ratio <<<"$best"))}"; then best=$r; fi
  done
  cell[$t,burst]=$(jq -r '"\(.staircase_ratio)× (wall \(.first_wave_ms|floor) ms, one query \(.baseline_p50_ms|floor) ms, \(.rcodes.NOERROR // 0)/30 ok)"' <<<"$best")
  stop_all

  # saturated primary
  upstream p "stall=1" 30ms; upstream s "latency=5ms" 30ms; dns=$((++port)); target "$t" "$dns" "$p" "$s"
  burst "$dns" -n 42 -baseline 0 -timeout 6s >"$work/a.json" &
  a=$!
  sleep 0.3 # burst A reaches the primary first
  r=$(burst "$dns" -n 300 -baseline 0 -timeout 5s)
  wait "$a" || true
  cell[$t,saturated]=$(jq -r '"\(.timeouts + .errors + (.rcodes.SERVFAIL // 0)) of 300 lost, p99 \(.p99_ms|floor) ms"' <<<"$r")
  cell[$t,saturatedA]=$(jq -r '"\(.timeouts + .errors + (.rcodes.SERVFAIL // 0)) of 42 lost, max \(.max_ms|floor) ms"' <"$work/a.json")
  stop_all

  # every upstream stalls
  upstream p "stall=1" 30ms; upstream s "stall=1" 30ms; dns=$((++port)); target "$t" "$dns" "$p" "$s"
  r=$(burst "$dns" -n 10 -baseline 0 -timeout 6s)
  cell[$t,stall]=$(jq -r '"\(.rcodes | to_entries | map("\(.value) \(.key)") | join(", ") | if . == "" then "none" else . end) answered, \(.timeouts) timed out; max \(.max_ms|floor) ms"' <<<"$r")
  stop_all

  # throughput
  upstream u "" 0; dns=$((++port)); target "$t" "$dns" "$u"
  burst "$dns" -n 1 -baseline 0 -timeout 3s >/dev/null
  prefix=$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')
  for i in $(seq 1 200000); do echo "p$prefix-$i.perf.test A"; done >"$work/queries"
  out=$(dnsperf -s 127.0.0.1 -p "$dns" -d "$work/queries" -l 10 -c 8 -T 2 -q 256 -t 5 -S 0 2>&1 || true)
  qps=$(awk '/Queries per second/ {printf "%.0f", $4}' <<<"$out")
  lost=$(awk '/Queries lost/ {print $3, $4}' <<<"$out")
  r=$(burst "$dns" -rate 5000 -duration 5s -timeout 2s -baseline 0)
  cell[$t,qps]=$qps
  cell[$t,throughput]=$(printf '%s QPS, lost %s; at 5000 QPS p99 %s ms' "$qps" "$lost" "$(jq -r '.p99_ms' <<<"$r")")
  stop_all
done

versions="nxdns $(git describe --always --dirty 2>/dev/null || echo '?'); $(dnsdist --version 2>/dev/null | head -1 | cut -d' ' -f1-2); $(kresd --version 2>/dev/null | head -1)"
echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) cores ($versions)"
echo
printf '| load |'; for t in $targets; do printf ' %s |' "$t"; done; echo
printf '|---|'; for t in $targets; do printf '%s' '---|'; done; echo
row() { printf '| %s |' "$1"; for t in $targets; do printf ' %s |' "${cell[$t,$2]}"; done; echo; }
row "burst of 30 (20 ms path, 40 ms upstream)" burst
row "saturated primary: the 42 that met the stall" saturatedA
row "saturated primary: 300 at once" saturated
row "every upstream stalls (client waits 6 s)" stall
row "throughput over DoT (dnsperf, loopback)" throughput
if [[ " $targets " == *" nxdns "* && " $targets " == *" dnsdist "* ]] && [ -n "${cell[nxdns,qps]}" ] && [ -n "${cell[dnsdist,qps]}" ]; then
  echo
  echo "nxdns ÷ dnsdist throughput: $(awk "BEGIN{printf \"%.2f\", ${cell[nxdns,qps]} / ${cell[dnsdist,qps]}}")×"
fi
