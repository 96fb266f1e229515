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

# ---- burst: 30 names through one DoT upstream answering after 100 ms ----
FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-primary up "dot://$UPADDR:853?latency=100ms"
poll 30 up_port 853 || fail "burst: fake upstream listening" "port 853"
scen_start "$PRIMARY"
sstart=$(date +%s)
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

# ---- saturated primary (vmtests/saturated-primary.nix) --------------------
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
