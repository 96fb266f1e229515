# The field scenarios of docs/design.md#scenarios inside the VM (sourced by
# scripts/vm/guest.sh, phase 1): the same thresholds as vmtests/burst.nix
# and vmtests/saturated-primary.nix, with the kernel's netem for the path.
# Three network namespaces: `up` (the fake upstreams, nxdns-fakeup), `res`
# (the real nxdns.service, moved in with a NetworkNamespacePath= drop-in)
# and `cli` (nxdns-burst, kdig). Every packet `up` sends waits 30 ms (±4),
# as on the NixOS tests' upstream node; the client's path is a LAN.

modprobe sch_netem || fail "netem" "modprobe sch_netem"
for ns in up res cli; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add ur netns up type veth peer name ru netns res
ip link add cr netns cli type veth peer name rc netns res
ip -n up addr add 10.0.1.2/24 dev ur; ip -n up link set ur up
ip -n res addr add 10.0.1.1/24 dev ru; ip -n res link set ru up
ip -n res addr add 10.0.2.1/24 dev rc; ip -n res link set rc up
ip -n cli addr add 10.0.2.2/24 dev cr; ip -n cli link set cr up
netem() { ip netns exec up tc qdisc replace dev ur root netem "$@"; }
netem delay 30ms 4ms
ip netns exec up tc qdisc show dev ur >"$OUT/netem.txt"
mkdir -p /run/systemd/system/nxdns.service.d
printf '[Service]\nNetworkNamespacePath=/run/netns/res\n' >/run/systemd/system/nxdns.service.d/vm-netns.conf
systemctl daemon-reload

RES=10.0.2.1
UPADDR=10.0.1.2
BACKOFF="upstream entering backoff"
RECOVERED="upstream recovered"
inns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
nsget() { # nsget NS PORT PATH: GET http://127.0.0.1:PORT/PATH in namespace NS
  ip netns exec "$1" bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$2"' && printf "GET %s HTTP/1.0\r\n\r\n" "'"$3"'" >&3 && sed "1,/^\r$/d" <&3'
}
metrics_text() { nsget res 9153 /metrics; }
counters() { nsget up "$1" /counters; }
burst() { # burst NAME ARGS...: nxdns-burst from the client namespace; its JSON
  local name=$1 since; shift
  since=$(date '+%Y-%m-%d %H:%M:%S')
  inns cli nxdns-burst -target $RES:53 "$@" 2>>"$OUT/burst.log" | tee "$OUT/scenario-$name.json"
  # What each side saw, to tell a failed query's cause (client timeout,
  # nxdns's SERVFAIL and its reason, a packet netem dropped) afterwards.
  { echo "== netem (up's qdisc, cumulative)"; inns up tc -s qdisc show dev ur
    echo "== nxdns journal during the burst"; journalctl -u nxdns.service --no-pager -o short-monotonic --since "$since" | grep -v '"rcode": "NOERROR"'
    echo "== fake upstream counters"; counters 8081; echo; } >"$OUT/scenario-$name-diag.txt" 2>&1
}
assert_clean() { # assert_clean NAME JSON
  local r=$2 q
  q=$(jnum "$r" queries)
  if [ -n "$q" ] && [ "$q" -gt 0 ] && [ "$(jnum "$r" timeouts)" = 0 ] && [ "$(jnum "$r" errors)" = 0 ] &&
    [ "$(jnum "$r" NOERROR)" = "$q" ] && ! grep -q '"SERVFAIL"' <<<"$r"; then
    ok "$1: every query NOERROR (no SERVFAIL, timeout or error)"
  else
    fail "$1: every query NOERROR" "$r"
  fi
}
journal_count() { journalctl -u nxdns.service --no-pager -o cat --since "$scen_since" | grep -cF "$1"; }
# journal_count0 NEEDLE: the lines about upstream index 0, the primary
journal_count0() { journalctl -u nxdns.service --no-pager -o cat --since "$scen_since" | grep -F "$1" | grep -cF '"index": 0'; }
up_port() { inns up bash -c "exec 3<>/dev/tcp/$UPADDR/$1" 2>/dev/null; }
res_ready() { systemctl is-active --quiet nxdns && inns cli kdig @$RES +timeout=2 +retry=0 localhost A | grep -q NOERROR; }

scenconf() { # scenconf UPSTREAMS-TOML
  cat <<EOF
# nxdns VM scenario configuration (scripts/vm/scenarios.sh)
[dns]
listen = ["0.0.0.0:53"]
allow = ["local"]
cache_file = "/var/lib/nxdns/cache.bin"
$1
# As vmtests/common.nix and the loopback harness: the scenarios measure the
# pool, and validation has tests of its own. With the default shadow
# validation the fake zones' key fetches (the root's DNSKEY included) went
# through the same upstreams and budgets: 63 upstream queries for a cold
# burst of 30, and a budget exhausted on the stalled primary.
[dnssec]
mode = "off"
[web]
listen = "127.0.0.1:9153"
[history]
path = "/var/lib/nxdns/history.db"
max_bytes = 67108864
EOF
}
PRIMARY='[[upstreams]]
url = "tls://primary.test"
address = "10.0.1.2"
ca_file = "'$CA'"
priority = 0'
STANDBY='[[upstreams]]
url = "https://standby.test/dns-query"
address = "10.0.1.2"
ca_file = "'$CA'"
priority = 1'

scen_start() { # scen_start UPSTREAMS: restart nxdns in `res` on that file
  scenconf "$1" >/etc/nxdns/nxdns.toml
  scen_since=$(date '+%Y-%m-%d %H:%M:%S')
  systemctl restart nxdns
  poll 60 res_ready || fail "scenario: nxdns ready in the res namespace" "$(systemctl status nxdns --no-pager | tail -5)"
  # Ready means every upstream out of backoff too: under TCG a start-up
  # probe of a just-started fake upstream can miss its timeout, and the
  # episode it starts (and ends a second later) is not the scenario's.
  poll 60 upstreams_healthy || fail "scenario: every upstream out of backoff after start" "$(metrics_text | grep '^nxdns_upstream_backoff')"
}
upstreams_healthy() { [ "$(metric "$(metrics_text)" nxdns_upstream_backoff)" = 0 ]; }
systemctl stop vm-fakeup 2>/dev/null
# want NAME: run scenario NAME (all unless NXDNS_VM_ONLY names some; the
# sections below are not indented under their `if want`, to keep them as
# they were).
want() { [ -z "${ONLY:-}" ] || [ "$ONLY" = scenarios ] || [[ ",$ONLY," == *",$1,"* ]]; }

# ---- burst: 30 names through one DoT upstream answering after 100 ms ----
sstart=$(date +%s)
if want burst; then
FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-primary up "dot://$UPADDR:853?latency=100ms"
poll 30 up_port 853 || fail "burst: fake upstream listening" "port 853"
scen_start "$PRIMARY"
# Cold: nothing warmed, the first connection and handshake are part of the
# burst (the primary's start-up probe may have opened one: restarting the
# fake upstream drops it).
systemctl restart vm-primary; poll 30 up_port 853
r=$(burst cold -n 30 -timeout 5s -baseline 0 -suffix cold.test.)
assert_clean "burst cold" "$r"
timed "burst cold: wall < 1500 ms, slowest < 2000 ms ($(jnum "$r" wall_ms) ms, $(jnum "$r" max_ms) ms)" \
  bash -c "awk 'BEGIN { exit !($(jnum "$r" wall_ms) < 1500 && $(jnum "$r" max_ms) < 2000) }'"
cold_wall=$(jnum "$r" wall_ms)
# Warm (vmtests/burst.nix): one query through the chain first.
check "burst: one query goes through the whole chain over DoT" bash -c "ip netns exec cli kdig @$RES +timeout=6 +retry=0 one.chain.test A | grep -q NOERROR"
before=$(counters 8081)
r=$(burst warm -n 30 -timeout 5s -baseline 5 -suffix burst.test.)
assert_clean "burst warm" "$r"
timed "burst warm: staircase ratio < 3 ($(jnum "$r" staircase_ratio))" lt "$(jnum "$r" staircase_ratio)" 3
timed "burst warm: wall < 1500 ms ($(jnum "$r" wall_ms))" lt "$(jnum "$r" wall_ms)" 1500
timed "burst warm: slowest < 2000 ms ($(jnum "$r" max_ms))" lt "$(jnum "$r" max_ms)" 2000
c=$(counters 8081)
check "burst: the upstream saw reused connections (handshakes $(jnum "$c" handshakes) < 15)" lt "$(jnum "$c" handshakes)" 15
check "burst: the upstream answered >= 36 ($(jnum "$c" answered))" ge "$(jnum "$c" answered)" 36
m=$(metrics_text)
check "burst: /metrics, no budget exhaustion" test "$(metric "$m" nxdns_upstream_budget_exhausted_total)" = 0
check "burst: /metrics, no failure on the healthy upstream" \
  test "$(metric "$m" nxdns_upstream_requests_total 'outcome="failure"')" = 0
check "burst: the journal shows no backoff episode" test "$(journal_count "$BACKOFF")" = 0
warm_base=$(jnum "$r" baseline_p50_ms)
echo "burst: warm wall $(jnum "$r" wall_ms) ms, one warm query $warm_base ms, ratio $(jnum "$r" staircase_ratio); cold wall $cold_wall ms = $(awk "BEGIN { printf \"%.2f\", $cold_wall / $warm_base }") x one warm query" >>"$OUT/timings"

# With 1 % loss on the upstream path as well: nothing may fail.
netem delay 30ms 4ms loss 1%
r=$(burst loss -n 30 -waves 3 -wave-gap 500ms -timeout 5s -baseline 5 -suffix loss.test.)
assert_clean "burst with 1% loss" "$r"
check "burst with 1% loss: slowest < 4000 ms ($(jnum "$r" max_ms))" lt "$(jnum "$r" max_ms)" 4000
echo "burst with 1% loss: first wave $(jnum "$r" first_wave_ms) ms, p99 $(jnum "$r" p99_ms) ms, max $(jnum "$r" max_ms) ms, one query $(jnum "$r" baseline_p50_ms) ms" >>"$OUT/timings"
netem delay 30ms 4ms
systemctl stop vm-primary
fi

# ---- saturated primary (vmtests/saturated-primary.nix) --------------------
if want saturated; then
FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-primary up "dot://$UPADDR:853?latency=20ms"
FAKEUP_HTTP=127.0.0.1:8082 fakeup_start vm-standby up "doh://$UPADDR:443/dns-query?latency=20ms"
poll 30 up_port 853; poll 30 up_port 443
scen_start "$PRIMARY
$STANDBY"
check "saturated: the healthy primary answers first" \
  bash -c "ip netns exec cli kdig @$RES +timeout=6 +retry=0 warmup.saturated.test A | grep -q NOERROR"
systemctl stop vm-primary
FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-primary-stall up "dot://$UPADDR:853?stall=1"
poll 30 up_port 853
sb=$(jnum "$(counters 8082)" answered)
r=$(burst saturated -n 30 -waves 3 -wave-gap 500ms -timeout 6s -suffix saturated.test.)
assert_clean "saturated" "$r"
check "saturated: slowest < 4000 ms ($(jnum "$r" max_ms))" lt "$(jnum "$r" max_ms)" 4000
sa=$(jnum "$(counters 8082)" answered)
check "saturated: the standby answered every query of the burst ($((sa - sb)) >= $(jnum "$r" queries))" \
  test "$((sa - sb))" -ge "$(jnum "$r" queries)"
m=$(metrics_text)
echo "$m" >"$OUT/scenario-saturated-metrics.txt"
check "saturated: /metrics, zero budget exhaustion" test "$(metric "$m" nxdns_upstream_budget_exhausted_total)" = 0
check "saturated: /metrics, the stalled primary's failures recorded" \
  ge "$(metric "$m" nxdns_upstream_requests_total 'index="0",outcome="failure"')" 1
check "saturated: /metrics, standby successes >= queries" \
  ge "$(metric "$m" nxdns_upstream_requests_total 'index="1",outcome="success"')" "$(jnum "$r" queries)"
queued=$(metric "$m" nxdns_upstream_queued_total)
waited=$(metric "$m" nxdns_upstream_queued_seconds_total)
check "saturated: queued briefly ($queued queries, $waited s)" \
  bash -c "awk 'BEGIN { q = $queued; if (q < 1) q = 1; exit !($waited <= q) }'"
poll 60 bash -c "journalctl -u nxdns.service --no-pager -o cat --since '$scen_since' | grep -qF '$BACKOFF'"
check "saturated: one backoff episode of the primary in the journal ($(journal_count0 "$BACKOFF"))" test "$(journal_count0 "$BACKOFF")" = 1
check "saturated: no recovery line for the primary" test "$(journal_count0 "$RECOVERED")" = 0
echo "saturated: backoff lines $(journal_count "$BACKOFF") in all ($(journal_count0 "$BACKOFF") of the primary)" >>"$OUT/timings"
journalctl -u nxdns.service --no-pager -o short-monotonic --since "$scen_since" >"$OUT/scenario-saturated-journal.txt"
echo "saturated: p50 $(jnum "$r" p50_ms) ms, p99 $(jnum "$r" p99_ms) ms, max $(jnum "$r" max_ms) ms over $(jnum "$r" queries) queries; queued $queued for $waited s" >>"$OUT/timings"
systemctl stop vm-primary-stall vm-standby
fi

# ---- DoQ against DoT on one path (issue 37) -------------------------------
# One fake upstream with a DoT (TCP) and a DoQ (UDP) listener on
# 10.0.1.2:853, both answering after 60 ms, as vmtests/doqburst_test.go.
# nxdns has one upstream of each, each the pool of its own filter group
# (docs/filter.md, "Per-group upstreams"): the client's 10.0.2.2 is in
# group dot, its second address 10.0.3.2 (a second subnet on the same link:
# the kernel sends from it to 10.0.3.1) in group doq. So one nxdns holds
# one connection of each, and the waves alternate DoQ, DoT, DoQ, ... under
# the same host load. First the warm burst of 30 on the 30 ms path (ratio
# to one query); then waves of 30 with 1 % loss each way: netem on up's
# side (delay 30 ms ± 4, loss 1 %) and on res's (loss 1 %), so a lost query
# and a lost answer both happen, TCP segments and QUIC packets alike. Every
# query must be answered; the latencies are reported, not asserted (TCG on
# shared cores: docs/testing-vm.md, "Timing"). docs/performance.md, "In the
# systemd VM", has the runs.
if want doq; then
DQ_WARM=${DQ_WARM:-3}  # warm bursts each side
DQ_ROUNDS=${DQ_ROUNDS:-5} # lossy rounds of 2 waves of 30 each side: 300 queries, p99 the 297th
ip -n res addr add 10.0.3.1/24 dev rc
ip -n cli addr add 10.0.3.2/24 dev cr
declare -A DQ_TARGET=([dot]=$RES [doq]=10.0.3.1)
FAKEUP_HTTP=127.0.0.1:8083 fakeup_start vm-doqdot up "dot://$UPADDR:853?latency=60ms" "doq://$UPADDR:853?latency=60ms"
poll 30 up_port 853 || fail "doq/dot: fake upstream listening" "port 853"
scen_start "[[upstreams]]
url = \"tls://primary.test\"
address = \"$UPADDR\"
ca_file = \"$CA\"
[[upstreams]]
url = \"quic://primary.test\"
address = \"$UPADDR\"
ca_file = \"$CA\"
enabled = false
[[filter.groups]]
name = \"dot\"
clients = [\"10.0.2.2\"]
upstreams = [\"tls://primary.test\"]
[[filter.groups]]
name = \"doq\"
clients = [\"10.0.3.2\"]
upstreams = [\"quic://primary.test\"]"
for tr in doq dot; do
  check "doq/dot: a query from the $tr group's address is answered" \
    bash -c "ip netns exec cli kdig @${DQ_TARGET[$tr]} +timeout=6 +retry=0 one.$tr.chain.test A | grep -q NOERROR"
  check "doq/dot: nxdns's query log says it went through the $tr group's pool" \
    poll 30 bash -c "journalctl -u nxdns.service --no-pager -o cat --since '$scen_since' | grep -F one.$tr.chain.test | grep -qF '\"pool\": \"$tr\"'"
done
dq_burst() { # dq_burst TR ARGS...: one nxdns-burst through TR's group, its JSON line
  local tr=$1; shift
  inns cli nxdns-burst -target "${DQ_TARGET[$tr]}:53" "$@" 2>>"$OUT/burst.log" | tee -a "$OUT/scenario-doq-dot-$tr.jsonl"
}
# Warm: the burst of 30 as a ratio to one query (5 sequential first).
declare -A dq_ratios=()
for i in $(seq "$DQ_WARM"); do
  for tr in doq dot; do
    r=$(dq_burst "$tr" -n 30 -timeout 5s -baseline 5 -suffix "warm$i.$tr.test.")
    assert_clean "doq/dot: warm burst $i over $tr" "$r"
    rr=$(jnum "$r" staircase_ratio)
    dq_ratios[$tr]+="${dq_ratios[$tr]:+ }${rr:-0}"
  done
done
# Lossy: fresh qdiscs, so their counters are this phase's alone.
inns up tc qdisc del dev ur root
netem delay 30ms 4ms loss 1%
inns res tc qdisc replace dev ru root netem loss 1%
lsince=$(date '+%Y-%m-%d %H:%M:%S')
declare -A dq_q=() dq_ok=() dq_bad=() dq_cmax=()
c0=$(counters 8083)
# Two waves an invocation: under TCG starting nxdns-burst cost more than
# a wave (3-4 s against 0.3-2 s at host load 13).
for i in $(seq "$DQ_ROUNDS"); do
  for tr in doq dot; do
    r=$(dq_burst "$tr" -n 30 -waves 2 -timeout 5s -baseline 0 -suffix "loss.$tr.test.")
    nq=$(jnum "$r" queries) n=$(jnum "$r" NOERROR) t=$(jnum "$r" timeouts) e=$(jnum "$r" errors)
    dq_q[$tr]=$((${dq_q[$tr]:-0} + ${nq:-0}))
    dq_ok[$tr]=$((${dq_ok[$tr]:-0} + ${n:-0}))
    dq_bad[$tr]=$((${dq_bad[$tr]:-0} + ${t:-0} + ${e:-0}))
    dq_cmax[$tr]=$(awk -v a="${dq_cmax[$tr]:-0}" -v b="$(jnum "$r" max_ms)" 'BEGIN { print (b + 0 > a + 0 ? b : a) }')
  done
done
c1=$(counters 8083)
{ echo "== netem, up -> res (ur)"; inns up tc -s qdisc show dev ur
  echo "== netem, res -> up (ru)"; inns res tc -s qdisc show dev ru
  echo "== fake upstream counters before and after the lossy waves"; echo "$c0"; echo "$c1"
  echo "== nxdns's upstream metrics"; metrics_text | grep -E '^nxdns_upstream_(requests|budget|backoff|connections|reuse)'
  echo "== nxdns journal during the lossy waves, its NOERROR query lines left out"
  journalctl -u nxdns.service --no-pager -o short-monotonic --since "$lsince" | grep -v '"rcode": "NOERROR"'; } >"$OUT/scenario-doq-dot-diag.txt" 2>&1
dropped() { inns "$1" tc -s qdisc show dev "$2" | grep -oE 'dropped [0-9]+' | head -1 | cut -d' ' -f2; }
drop_ur=$(dropped up ur) drop_ru=$(dropped res ru)
netem delay 30ms 4ms
inns res tc qdisc del dev ru root
# handshakes LISTENER JSON: that listener's handshakes in the counters JSON
handshakes() { jnum "$(grep -oE "\"$1://[^\"]*\":\{[^}]*\}" <<<"$2")" handshakes; }
# nxdns's own duration_ms of each query, from its query log: exact
# percentiles over every query of a side (nxdns-burst reports each wave's).
pctl() { # pctl P: the nearest-rank percentile of the numbers on stdin
  sort -n | awk -v p="$1" '{ v[NR] = $1 } END { if (!NR) { print 0; exit } r = p * NR / 100; k = int(r); if (k < r) k++; if (k < 1) k = 1; print v[k] }'
}
# query_lines SINCE REGEX: nxdns's query lines since SINCE whose name matches
query_lines() { journalctl -u nxdns.service --no-pager -o cat --since "$1" | grep -E "\"name\": \"[^\"]*$2" | grep -F '"duration_ms"'; }
durations() { grep -oE '"duration_ms": ?[0-9.]+' | grep -oE '[0-9.]+$'; }
lossy_lines() { query_lines "$lsince" "\\.loss\\.$1\\.test\\."; }
json="{\"warm_ratio\": {" sep=""
for tr in doq dot; do json+="$sep\"$tr\": [$(tr ' ' , <<<"${dq_ratios[$tr]}")]"; sep=", "; done
# The control: the same waves of 30 without loss, the warm bursts' 90
# queries a side (their sequential baseline queries, "-baseN", left out).
json+="}, \"lossless\": {" sep=""
for tr in doq dot; do
  query_lines "$scen_since" "-[0-9]+\\.warm[0-9]+\\.$tr\\.test\\." | durations >"$OUT/scenario-doq-dot-$tr-lossless-durations.txt"
  f=$OUT/scenario-doq-dot-$tr-lossless-durations.txt
  json+="$sep\"$tr\": {\"queries\": $(wc -l <"$f"), \"p50_ms\": $(pctl 50 <"$f"), \"p99_ms\": $(pctl 99 <"$f"), \"max_ms\": $(pctl 100 <"$f")}"; sep=", "
  echo "doq/dot without loss (the warm bursts, $(wc -l <"$f") queries): $tr p50 $(pctl 50 <"$f") ms, p99 $(pctl 99 <"$f") ms, max $(pctl 100 <"$f") ms (nxdns's duration_ms)" >>"$OUT/timings"
done
json+="}, \"lossy\": {\"waves\": $((2 * DQ_ROUNDS)), \"netem_loss\": \"1% each way\", \"netem_dropped\": {\"up_to_res\": ${drop_ur:-0}, \"res_to_up\": ${drop_ru:-0}}"
declare -A dq_p99=()
for tr in doq dot; do
  # journald may lag behind under TCG: wait for every line, bounded.
  poll 30 bash -c "[ \"\$(journalctl -u nxdns.service --no-pager -o cat --since '$lsince' | grep -cF '.loss.$tr.test.')\" -ge ${dq_q[$tr]} ]"
  lossy_lines "$tr" | durations >"$OUT/scenario-doq-dot-$tr-durations.txt"
  logged=$(wc -l <"$OUT/scenario-doq-dot-$tr-durations.txt")
  sf=$(lossy_lines "$tr" | grep -c '"rcode": "SERVFAIL"')
  p50=$(pctl 50 <"$OUT/scenario-doq-dot-$tr-durations.txt") p99=$(pctl 99 <"$OUT/scenario-doq-dot-$tr-durations.txt") max=$(pctl 100 <"$OUT/scenario-doq-dot-$tr-durations.txt")
  dq_p99[$tr]=$p99
  h0=$(handshakes "$tr" "$c0") h1=$(handshakes "$tr" "$c1")
  hs=$((${h1:-0} - ${h0:-0}))
  json+=", \"$tr\": {\"queries\": ${dq_q[$tr]}, \"noerror\": ${dq_ok[$tr]}, \"timeouts_errors\": ${dq_bad[$tr]}, \"servfail_logged\": $sf, \"logged\": $logged, \"p50_ms\": $p50, \"p99_ms\": $p99, \"max_ms\": $max, \"client_max_ms\": ${dq_cmax[$tr]}, \"handshakes\": $hs}"
  # Both sides: every query answered before the client gave up. DoT's
  # must all be NOERROR, as in the DoT-only lossy waves above. DoQ's
  # NOERROR count is reported, not asserted: one run of twelve on
  # 2026-12-03 got 8 SERVFAIL at the 2 s attempt timeout on a connection
  # that stayed up, its cause not found yet (docs/performance.md, "DoQ
  # against DoT in the VM"); a red VM step every dozen runs would hide
  # every other check's news.
  check "doq/dot: with 1% loss each way, every query over $tr answered before the client gave up (${dq_ok[$tr]} of ${dq_q[$tr]} NOERROR, $sf SERVFAIL logged, ${dq_bad[$tr]} timeouts or errors)" \
    bash -c "[ ${dq_q[$tr]} -gt 0 ] && [ ${dq_bad[$tr]} = 0 ]"
  if [ "$tr" = dot ]; then
    check "doq/dot: with 1% loss each way, every query over dot NOERROR" bash -c "[ ${dq_ok[$tr]} = ${dq_q[$tr]} ] && [ $sf = 0 ]"
  fi
  echo "doq/dot lossy (1 % each way, $((2 * DQ_ROUNDS)) waves of 30): $tr p50 $p50 ms, p99 $p99 ms, max $max ms (nxdns's duration_ms, $logged logged), client max ${dq_cmax[$tr]} ms; ${dq_ok[$tr]} of ${dq_q[$tr]} NOERROR; $hs handshakes" >>"$OUT/timings"
done
ratio=$(awk -v a="${dq_p99[doq]}" -v b="${dq_p99[dot]}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }')
json+=", \"p99_doq_over_dot\": $ratio}}"
echo "$json" >"$OUT/scenario-doq-dot.json"
echo "doq/dot warm burst of 30 (30 ms path, no loss), ratio to one query: doq ${dq_ratios[doq]}; dot ${dq_ratios[dot]}" >>"$OUT/timings"
echo "doq/dot lossy: p99 doq / dot = $ratio (netem dropped ${drop_ur:-?} packets up->res, ${drop_ru:-?} res->up)" >>"$OUT/timings"
systemctl stop vm-doqdot
fi

# ---- SD-card wear: bytes written at a household's rate ---------------------
# /proc/PID/io write_bytes (what reached the block layer for this process)
# over a fixed-rate run, with the history and the cache file on disk.
if [ "${WEAR_SECONDS:-0}" -gt 0 ]; then
  FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-primary up "dot://$UPADDR:853?latency=5ms"
  poll 30 up_port 853
  scen_start "$PRIMARY"
  pid=$(mainpid)
  w0=$(awk '/^write_bytes/ { print $2 }' /proc/$pid/io); s0=$(date +%s)
  inns cli nxdns-burst -target $RES:53 -rate "$WEAR_RATE" -duration "${WEAR_SECONDS}s" -baseline 0 -suffix wear.test. >"$OUT/wear-burst.json" 2>>"$OUT/burst.log"
  w1=$(awk '/^write_bytes/ { print $2 }' /proc/$pid/io); s1=$(date +%s)
  systemctl stop nxdns
  echo "wear: $((w1 - w0)) bytes written in $((s1 - s0)) s at $WEAR_RATE q/s ($(jnum "$(cat "$OUT/wear-burst.json")" queries) queries)" >>"$OUT/timings"
  cp /proc/$pid/io "$OUT/wear-io.txt" 2>/dev/null
  systemctl stop vm-primary
fi

# Back to the lifecycle's own namespace and file.
rm -f /run/systemd/system/nxdns.service.d/vm-netns.conf
systemctl daemon-reload
testconf "reloaded.home. 300 IN A 192.0.2.2" >/etc/nxdns/nxdns.toml
FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-fakeup - "dot://127.0.0.2:853?latency=5ms"
systemctl restart nxdns
poll 30 systemctl is-active --quiet nxdns
echo "scenarios: $(($(date +%s) - sstart)) s" >>"$OUT/timings"
