#!/bin/bash
# Runs inside the Debian 12 VM (scripts/vm/run.sh), started at boot by
# vm-agent.service after multi-user.target, as root. Everything it checks
# goes through the real systemd, journald and dpkg of the guest
# (docs/testing-vm.md lists the cases). /host is the host's share (9p):
#   /host/in/    the .debs, the test binaries, run parameters
#   /host/out/   results: `results` (one "ok NAME" or "FAIL NAME: why" a
#                line), captures (status, journal, scenario JSON), `done`
# A second boot of the same disk (the broken-config-at-boot case) continues
# from /host/out/phase.
set -uo pipefail
IN=/host/in
OUT=/host/out
mkdir -p "$OUT"
exec >>"$OUT/guest.log" 2>&1
export DEBIAN_FRONTEND=noninteractive PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
. "$IN/params"          # VERSION_OLD, VERSION_NEW, SCENARIOS (0/1), HOST_QUERY (0/1), ARCH, ONLY
t0=$(date +%s)
now() { echo "$(($(date +%s) - t0))s"; }
ok() { echo "ok $1" >>"$OUT/results"; echo "[$(now)] ok $1"; }
fail() { echo "FAIL $1: $2" >>"$OUT/results"; echo "[$(now)] FAIL $1: $2"; }
# timed NAME CMD...: a timing bound of the KVM tests (vmtests/*.nix). Under
# TCG on shared cores it is reported, not enforced: "ok" or "SLOW" with the
# value, and the run's host load in timings (docs/testing-vm.md, "Timing").
timed() {
  local name=$1; shift
  if "$@"; then ok "$name"; else echo "SLOW $name" >>"$OUT/results"; echo "[$(now)] SLOW $name"; fi
}
check() { # check NAME CMD...: ok when CMD succeeds
  local name=$1; shift
  if "$@"; then ok "$name"; else fail "$name" "$*"; fi
}
# poll SECONDS CMD...: CMD until it succeeds, at most SECONDS (a bounded
# poll, never a bare sleep).
poll() {
  local end=$(($(date +%s) + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -ge "$end" ] && return 1
    sleep 0.2
  done
}
finish() {
  echo "$1" >"$OUT/done"
  sync
  systemctl poweroff --no-block
  exit 0
}
mainpid() { systemctl show -p MainPID --value nxdns; }
journal() { journalctl -u nxdns.service --no-pager -o cat "$@"; }
q() { # q NAME [kdig args]: the rcode and answer of one query to 127.0.0.1
  kdig @127.0.0.1 +timeout=6 +retry=0 "$@"
}
answers() { q "$1" A | grep -qE "^$1\.?[[:space:]].*IN[[:space:]]+A[[:space:]]+$2"; }
noerror() { q "$@" | grep -q "status: NOERROR"; }
# HTTP GET over bash's /dev/tcp (no curl in the image): GET HOST PORT PATH
get() {
  exec 3<>"/dev/tcp/$1/$2" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$3" "$1" >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}
metric() { # metric TEXT NAME [LABELMATCH]: the sum of matching samples
  awk -v n="$2" -v l="${3:-}" '$1 ~ "^"n"({|$)" && index($1, l) { s += $NF } END { printf "%g", s + 0 }' <<<"$1"
}
jnum() { grep -oE "\"$2\":[0-9.e+-]+" <<<"$1" | head -1 | cut -d: -f2; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

install -m 0755 "$IN/nxdns-fakeup" "$IN/nxdns-burst" /usr/local/bin/
mkdir -p /usr/local/share/nxdns-vm
CA=/usr/local/share/nxdns-vm/ca.pem

# The test configuration: a DoT upstream (nxdns-fakeup on 127.0.0.2:853,
# its CA given by ca_file), the cache file and the history on disk.
testconf() { # testconf EXTRA-RECORD
  cat <<EOF
# nxdns VM test configuration (scripts/vm/guest.sh)
[dns]
listen = ["0.0.0.0:53", "[::]:53"]
allow = ["local"]
cache_file = "/var/lib/nxdns/cache.bin"

[[upstreams]]
url = "tls://primary.test"
address = "127.0.0.2"
ca_file = "$CA"

[local]
records = ["vm.home. 300 IN A 192.0.2.1"${1:+, \"$1\"}]

[web]
listen = "127.0.0.1:9153"

[history]
path = "/var/lib/nxdns/history.db"
max_bytes = 67108864
EOF
}

phase=$(cat "$OUT/phase" 2>/dev/null || echo 1)
echo "[$(now)] guest agent: phase $phase, $(uname -r), $(systemctl --version | head -1)"

fakeup_start() { # fakeup_start UNIT NETNS-OR-- LISTEN...
  local unit=$1 ns=$2; shift 2
  local args=()
  for l in "$@"; do args+=(-listen "$l"); done
  local pre=()
  [ "$ns" != - ] && pre=(-p NetworkNamespacePath=/run/netns/$ns)
  systemctl stop "$unit" 2>/dev/null
  systemctl reset-failed "$unit" 2>/dev/null
  systemd-run -q --unit="$unit" "${pre[@]}" /usr/local/bin/nxdns-fakeup "${args[@]}" \
    -ca-cert "$CA" -ca-key /usr/local/share/nxdns-vm/ca.key \
    -cert-names primary.test,standby.test,127.0.0.2,10.0.1.2 -http "${FAKEUP_HTTP:-127.0.0.1:8081}"
}

if [ -n "${ONLY:-}" ]; then
  # NXDNS_VM_ONLY (scripts/vm/run.sh): this tree's .deb, the fake
  # upstream's CA and the scenarios named, nothing else, one boot.
  timeout 300 apt-get install -y -q "$IN/nxdns_new.deb" </dev/null >"$OUT/apt-install-new.txt" 2>&1 ||
    fail "install: this tree's .deb" "$(tail -5 "$OUT/apt-install-new.txt")"
  FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-fakeup - "dot://127.0.0.2:853?latency=5ms"
  poll 30 test -s /usr/local/share/nxdns-vm/ca.key || fail "fakeup" "no CA written"
  . "$IN/scenarios.sh"
  finish 0
fi

if [ "$phase" = 1 ]; then
  # ---- install the older .deb, then change its configuration as an admin would
  if timeout 300 apt-get install -y -q "$IN/nxdns_old.deb" </dev/null >"$OUT/apt-install-old.txt" 2>&1; then
    ok "install: the older .deb installs non-interactively"
  else
    fail "install: the older .deb installs non-interactively" "$(tail -5 "$OUT/apt-install-old.txt")"
  fi
  # The shipped configuration's upstreams are public addresses, and the VM
  # has no network beyond its own (qemu user networking with restrict=on):
  # nxdns must start and bind :53 anyway (upstreams are probed, not needed).
  check "install: the unit is enabled and active with the shipped configuration" \
    poll 60 systemctl is-active --quiet nxdns
  check "no network: nxdns answers its own names without any upstream reachable" \
    poll 30 noerror localhost A

  # ---- the shipped configuration, set up as a household would: the steps
  # at the top of /etc/nxdns/nxdns.toml (and the README's "Open the
  # dashboard"): the password with `nxdns hash-password`, group nxdns, 640;
  # password_file and the listen on 0.0.0.0 uncommented; the router's
  # forward zones uncommented with its address (here nxdns-fakeup as the
  # router, on 127.0.0.3:5300). One change is the test's own: the list's
  # URL points at a hosts-format list served inside the guest (perl-base's
  # sockets: the image has no python, curl or busybox), so nothing is
  # downloaded. Then: the dashboard on the LAN address, the list blocking,
  # and the cache and the history across `systemctl restart`.
  conf=/etc/nxdns/nxdns.toml
  cp "$conf" "$OUT/household-shipped.toml"
  export lan; lan=$(ip -4 -o addr show dev eth0 | awk '{ sub("/.*", "", $4); print $4; exit }')
  echo "[$(now)] household: LAN address ${lan:-none}"
  printf '0.0.0.0 ads.blocked.lan\n0.0.0.0 tracker.blocked.lan\n' >/usr/local/share/nxdns-vm/hosts
  systemd-run -q --unit=vm-lists perl -MIO::Socket::INET -e '
    open(my $fh, "<", $ARGV[0]) or die "$ARGV[0]: $!"; my $b = do { local $/; <$fh> };
    my $s = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 8088, Listen => 5, ReuseAddr => 1) or die "listen: $!";
    while (my $c = $s->accept) {
      while (my $l = <$c>) { last if $l =~ /^\r?\n$/ }
      print $c "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " . length($b) . "\r\nConnection: close\r\n\r\n" . $b;
      close $c;
    }' /usr/local/share/nxdns-vm/hosts
  systemd-run -q --unit=vm-router /usr/local/bin/nxdns-fakeup -listen udp://127.0.0.3:5300 -listen tcp://127.0.0.3:5300
  PW=household-secret
  # http METHOD HOST PORT PATH [HEADERS] [FORM]: the whole HTTP/1.0
  # response (status line, headers, body) over bash's /dev/tcp.
  http() {
    exec 3<>"/dev/tcp/$2/$3" || return 1
    printf '%s %s HTTP/1.0\r\nHost: %s:%s\r\n%s' "$1" "$4" "$2" "$3" "${5:-}" >&3
    if [ -n "${6:-}" ]; then
      printf 'Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %s\r\n\r\n%s' "${#6}" "$6" >&3
    else
      printf '\r\n' >&3
    fi
    cat <&3
    exec 3<&-
  }
  export -f http
  status() { http "$@" 2>/dev/null | head -1 | awk '{ print $2 }'; }
  login() { # the session cookie of a login on the LAN address
    http POST "$lan" 9153 /login "" "password=$PW" | tr -d '\r' | sed -n 's/^Set-Cookie: \(nxdns_session=[^;]*\).*/\1/p'
  }
  check "household: before the password step the dashboard is not on the LAN address" \
    bash -c "[ -n '$lan' ] && ! true <>/dev/tcp/$lan/9153" 2>/dev/null
  printf '%s\n' "$PW" | nxdns hash-password >/etc/nxdns/web-password
  chgrp nxdns /etc/nxdns/web-password
  chmod 640 /etc/nxdns/web-password
  sed -i -e 's|^# listen = "0.0.0.0:9153"$|listen = "0.0.0.0:9153"|' \
    -e 's|^# password_file = |password_file = |' \
    -e 's|^# \[\[forward_zones\]\]$|[[forward_zones]]|' -e 's|^# zone = |zone = |' \
    -e 's|^# resolver = "udp://192.168.1.1:53"$|resolver = "udp://127.0.0.3:5300"|' \
    -e 's|^url = "https://raw.githubusercontent.com/StevenBlack/hosts/master/hosts"$|url = "http://127.0.0.1:8088/hosts"|' "$conf"
  diff -u "$OUT/household-shipped.toml" "$conf" >"$OUT/household.diff"
  check "household: the documented edits apply to the shipped file (9 lines changed)" \
    test "$(grep -c '^+[^+]' "$OUT/household.diff")" = 9
  check "household: systemctl reload accepts the documented setup" systemctl reload nxdns
  check "household: the dashboard answers on the LAN address $lan:9153 after the password step" \
    poll 30 bash -c "[ -n '$lan' ] && http GET $lan 9153 /api/health | head -1 | grep -q '^HTTP/1'"
  check "household: without a login, /api/queries on the LAN address is 401" test "$(status GET "$lan" 9153 /api/queries)" = 401
  check "household: without a login, the overview on the LAN address sends to /login" \
    bash -c "http GET $lan 9153 / | tr -d '\r' | grep -q '^Location: /login'"
  check "household: a wrong password is refused (401)" \
    test "$(http POST "$lan" 9153 /login "" "password=wrong" 2>/dev/null | head -1 | awk '{ print $2 }')" = 401
  cookie=$(login)
  check "household: the password logs in (a session cookie)" test -n "$cookie"
  check "household: a name on the list is blocked (0.0.0.0, block_response null)" poll 60 answers ads.blocked.lan 0.0.0.0
  check "household: a name not on the list is answered by the router (forward zone lan)" poll 30 answers printer.lan '198\.1[89]\.'
  q printer.lan A >"$OUT/household-printer.txt" 2>&1
  for i in 1 2 3 4 5; do q "host$i.lan" A >/dev/null; done
  q tracker.blocked.lan A >/dev/null
  queries_have() { http GET "$lan" 9153 "/api/queries?name=$2" "Cookie: $1"$'\r\n' | grep -qE "\"name\": ?\"$2"; }
  export -f queries_have
  check "household: the query log has the blocked name (/api/queries after login)" poll 30 queries_have "$cookie" ads.blocked.lan
  hist=/var/lib/private/nxdns/history.db
  ino=$(stat -c %i "$hist" 2>/dev/null)
  # The list's copy on disk serves it across the restart: the list's
  # server stops first.
  systemctl stop vm-lists
  jsince=$(date '+%Y-%m-%d %H:%M:%S')
  systemctl restart nxdns
  poll 30 systemctl is-active --quiet nxdns
  journal --since "$jsince" >"$OUT/journal-household-restart.txt"
  check "household restart: the cache came back from cache.db (journal: cache loaded, entries > 0)" \
    poll 30 bash -c "journalctl -u nxdns --no-pager -o cat --since '$jsince' | grep 'cache loaded' | grep 'cache.db' | grep -qE '\"entries\": [1-9]'"
  check "household restart: the history is the same file (inode $ino), none set aside as corrupt" \
    bash -c "[ -n '$ino' ] && [ \"\$(stat -c %i $hist)\" = '$ino' ] && ! ls /var/lib/private/nxdns/ | grep -q corrupt"
  poll 30 bash -c "http GET $lan 9153 /api/health | head -1 | grep -q '^HTTP/1'"
  cookie=$(login)
  check "household restart: the query log still has the rows from before (/api/queries after a new login)" \
    bash -c "[ -n '$cookie' ] && queries_have '$cookie' ads.blocked.lan && queries_have '$cookie' printer.lan"
  check "household restart: the list still blocks from its copy on disk (its server stopped)" poll 30 answers ads.blocked.lan 0.0.0.0
  journal --since "$jsince" >"$OUT/journal-household-restart.txt"
  # What the later cases expect: their own configuration (written below),
  # no password file, the helpers gone.
  systemctl stop vm-router
  rm -f /etc/nxdns/web-password

  # The fake upstream, with a CA it generates.
  FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-fakeup - "dot://127.0.0.2:853?latency=5ms"
  poll 30 test -s /usr/local/share/nxdns-vm/ca.key || fail "fakeup" "no CA written"
  testconf >/etc/nxdns/nxdns.toml    # the admin's change to a conffile

  # ---- upgrade to this tree's .deb: the conffile changed on both sides.
  # First as a careless script would (no dpkg options, stdin closed): it
  # must end, not hang on dpkg's conffile prompt.
  start=$(date +%s)
  timeout 300 apt-get install -y -q "$IN/nxdns_new.deb" </dev/null >"$OUT/apt-upgrade-plain.txt" 2>&1
  rc=$?
  echo "[$(now)] plain upgrade: rc $rc in $(($(date +%s) - start)) s"
  if [ "$rc" = 124 ]; then
    fail "upgrade: a plain apt-get install with a changed conffile ends (no prompt hang)" "timed out after 300 s"
  else
    ok "upgrade: a plain apt-get install with a changed conffile ends (no prompt hang; rc $rc)"
  fi
  # Then as docs/how-to/upgrade.md says (confdef, confold): keeps the admin's file.
  timeout 300 apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    "$IN/nxdns_new.deb" </dev/null >"$OUT/apt-upgrade.txt" 2>&1 ||
    fail "upgrade: apt-get install --force-confdef --force-confold" "$(tail -5 "$OUT/apt-upgrade.txt")"
  dpkg --force-confdef --force-confold --configure -a </dev/null >>"$OUT/apt-upgrade.txt" 2>&1
  check "upgrade: the new version is installed and configured" \
    bash -c "dpkg-query -W -f='\${Version} \${Status}' nxdns | grep -qx '$VERSION_NEW install ok installed'"
  check "upgrade: the admin's /etc/nxdns/nxdns.toml is kept" grep -q "nxdns VM test configuration" /etc/nxdns/nxdns.toml
  check "upgrade: the new shipped file is beside it as nxdns.toml.dpkg-dist" test -f /etc/nxdns/nxdns.toml.dpkg-dist
  check "upgrade: the unit is active after the upgrade" poll 60 systemctl is-active --quiet nxdns

  # ---- the running unit: dynamic user, capabilities, port 53
  poll 30 answers vm.home 192.0.2.1
  pid=$(mainpid)
  uid=$(awk '/^Uid:/ { print $2 }' /proc/$pid/status)
  user=$(ps -o user= -p "$pid")
  echo "[$(now)] nxdns pid $pid uid $uid user $user"
  check "unit: runs as a dynamic user (uid 61184-65519, named _nxdns) in the static group nxdns" \
    bash -c "[ $uid -ge 61184 ] && [ $uid -le 65519 ] && [ '$user' = _nxdns ] && ! grep -q '^_nxdns:' /etc/passwd &&
             grep -qE '^Groups:.*[[:space:]]$(getent group nxdns | cut -d: -f3)([[:space:]]|\$)' /proc/$pid/status"
  grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb):' /proc/$pid/status >"$OUT/caps.txt"
  check "unit: holds CAP_NET_BIND_SERVICE and nothing else (permitted, effective, bounding, ambient)" \
    bash -c "grep -E '^Cap(Prm|Eff|Bnd|Amb):' '$OUT/caps.txt' | awk '{print \$2}' | sort -u | grep -qx 0000000000000400 &&
             [ \$(grep -E '^Cap(Prm|Eff|Bnd|Amb):' '$OUT/caps.txt' | awk '{print \$2}' | sort -u | wc -l) = 1 ]"
  check "unit: NoNewPrivs is set" grep -qE '^NoNewPrivs:[[:space:]]+1' /proc/$pid/status
  ss -lnup >"$OUT/ss.txt"; ss -lntp >>"$OUT/ss.txt"
  check "unit: nxdns binds UDP and TCP port 53" \
    bash -c "grep -E '0\.0\.0\.0:53 .*pid=$pid,' '$OUT/ss.txt' | grep -q udp || grep -qE 'UNCONN.*0\.0\.0\.0:53 .*pid=$pid,' '$OUT/ss.txt'; grep -qE 'LISTEN.*0\.0\.0\.0:53 .*pid=$pid,' '$OUT/ss.txt'"
  check "unit: a query through the fake DoT upstream answers NOERROR" poll 30 noerror first.upstream.test A
  check "unit: Type=notify reached READY (active/running)" \
    bash -c "[ \"\$(systemctl show -p SubState --value nxdns)\" = running ]"

  # ---- reload: a good file applies, a bad one keeps the old
  testconf "reloaded.home. 300 IN A 192.0.2.2" >/etc/nxdns/nxdns.toml
  if systemctl reload nxdns; then ok "reload: a good file is accepted (systemctl reload exits 0)"; else fail "reload: good" "systemctl reload failed"; fi
  check "reload: the new configuration answers (reloaded.home)" poll 10 answers reloaded.home 192.0.2.2
  check "reload: same process (MainPID unchanged)" test "$(mainpid)" = "$pid"
  printf '[dns]\nlisten = ["0.0.0.0:53"]\nbudget_typo = 1\n[[upstreams]]\nurl = "ftp://x"\n' >/etc/nxdns/nxdns.toml
  jsince=$(date '+%Y-%m-%d %H:%M:%S')
  if systemctl reload nxdns 2>"$OUT/reload-bad.txt"; then
    fail "reload: a bad file fails systemctl reload" "exit 0"
  else
    ok "reload: a bad file fails systemctl reload"
  fi
  journal --since "$jsince" >"$OUT/journal-reload-bad.txt"
  check "reload: the journal names the bad lines (budget_typo, upstreams[0].url)" \
    bash -c "grep -q budget_typo '$OUT/journal-reload-bad.txt' && grep -q 'upstreams\[0\].url' '$OUT/journal-reload-bad.txt'"
  check "reload: after a bad file the old configuration still answers" answers reloaded.home 192.0.2.2
  check "reload: after a bad file the unit is active, same process" \
    bash -c "systemctl is-active --quiet nxdns && [ \"\$(systemctl show -p MainPID --value nxdns)\" = $pid ]"
  testconf "reloaded.home. 300 IN A 192.0.2.2" >/etc/nxdns/nxdns.toml
  systemctl reload nxdns || fail "reload: restore" "systemctl reload of the good file failed"

  # ---- the host reaches the VM's port 53 through the virtio NIC (hostfwd)
  if [ "${HOST_QUERY:-0}" = 1 ]; then
    { ip addr; ip route; networkctl status --no-pager; ss -lnu; } >"$OUT/net.txt" 2>&1
    touch "$OUT/ready-for-host-query"
    if poll 120 test -f "$IN/../host-query-done"; then
      check "network: a query from the host (TCP, hostfwd) through the VM's NIC answers (vm.home)" grep -q "192.0.2.1" "$IN/../host-query-done"
    else
      fail "network: a query from the host" "the host did not query within 120 s"
    fi
  fi

  # ---- state: the state directory as docs/deploy.md documents it
  for i in $(seq 1 20); do q "warm$i.state.test" A >/dev/null; done
  systemctl restart nxdns   # the cache file is written at shutdown
  poll 30 systemctl is-active --quiet nxdns
  pid2=$(mainpid)
  uid2=$(awk '/^Uid:/ { print $2 }' /proc/$pid2/status)
  stat -c '%n %U:%G %a %F' /var/lib/nxdns /var/lib/private /var/lib/private/nxdns /var/lib/private/nxdns/* >"$OUT/state-stat.txt" 2>&1
  check "state: /var/lib/nxdns is a symlink to private/nxdns (DynamicUser)" \
    test "$(readlink /var/lib/nxdns)" = private/nxdns
  check "state: /var/lib/private is root:root 0700" test "$(stat -c '%U:%G %a' /var/lib/private)" = "root:root 700"
  check "state: /var/lib/private/nxdns is the dynamic user's, 0700" \
    test "$(stat -c '%u %a' /var/lib/private/nxdns)" = "$uid2 700"
  check "state: lists/ is the dynamic user's, 0700" test "$(stat -c '%u %a' /var/lib/private/nxdns/lists)" = "$uid2 700"
  check "state: cache.bin and history.db are the dynamic user's, 0600" \
    bash -c "[ \"\$(stat -c '%u %a' /var/lib/private/nxdns/cache.bin)\" = '$uid2 600' ] && [ \"\$(stat -c '%u %a' /var/lib/private/nxdns/history.db)\" = '$uid2 600' ]"

  # ---- restart and stop are clean: SIGTERM honoured, nothing killed, files intact
  jsince=$(date '+%Y-%m-%d %H:%M:%S')
  for i in $(seq 1 10); do q "more$i.state.test" A >/dev/null; done
  systemctl restart nxdns
  poll 30 systemctl is-active --quiet nxdns
  systemctl stop nxdns
  systemctl show -p Result -p ExecMainCode -p ExecMainStatus nxdns >"$OUT/stop-show.txt"
  journalctl --since "$jsince" --no-pager -o short-monotonic >"$OUT/journal-restart-stop.txt"
  check "stop: Result=success, exited with status 0 (ExecMainCode=1 CLD_EXITED)" \
    bash -c "grep -qx Result=success '$OUT/stop-show.txt' && grep -qx ExecMainStatus=0 '$OUT/stop-show.txt' && grep -qx ExecMainCode=1 '$OUT/stop-show.txt'"
  check "stop: no SIGKILL and no stop timeout in the journal" \
    bash -c "! grep -qiE 'SIGKILL|timed out|Killing process' '$OUT/journal-restart-stop.txt'"
  check "stop: cache.bin and history.db intact after stop (non-empty)" \
    bash -c "[ -s /var/lib/private/nxdns/cache.bin ] && [ -s /var/lib/private/nxdns/history.db ]"
  systemctl start nxdns
  poll 30 systemctl is-active --quiet nxdns
  check "restart: the cache came back from the file (journal: cache loaded, entries > 0)" \
    bash -c "journalctl -u nxdns --no-pager -o cat -n 20 | grep 'cache loaded' | tail -1 | grep -qE '\"entries\": [1-9]'"
  check "restart: the history file opened again (no corrupt copy set aside)" \
    bash -c "! ls /var/lib/private/nxdns/ | grep -q corrupt"

  # ---- the watchdog: WatchdogSec=30s, and nxdns has been up well past it
  if [ -n "${SCENARIOS:-}" ] && [ "$SCENARIOS" = 1 ]; then
    . "$IN/scenarios.sh"
  fi
  check "watchdog: WatchdogUSec=30s and no watchdog timeout, no restart by systemd" \
    bash -c "[ \"\$(systemctl show -p WatchdogUSec --value nxdns)\" = 30s ] && [ \"\$(systemctl show -p NRestarts --value nxdns)\" = 0 ] && ! journalctl -u nxdns --no-pager | grep -qi 'watchdog timeout'"

  # What an operator sees (docs/testing-vm.md quotes them).
  SYSTEMD_COLORS=0 systemctl status nxdns --no-pager -n 12 >"$OUT/status-running.txt" 2>&1
  journalctl -u nxdns --no-pager -n 40 >"$OUT/journal-running.txt"

  # ---- broken configuration at boot: the next boot must fail visibly
  printf '[dns]\nlisten = ["0.0.0.0:53"]\nbudget_typo = 1\n' >/etc/nxdns/nxdns.toml
  echo 2 >"$OUT/phase"
  sync
  echo "[$(now)] powering off; run.sh boots the same disk again for phase 2"
  systemctl poweroff --no-block
  exit 0
fi

if [ "$phase" = 2 ]; then
  # Restart=always, no start limit: it keeps trying (activating/auto-restart
  # between tries) and never reaches active with this file.
  poll 60 bash -c "journalctl -b -u nxdns --no-pager -o cat | grep -q budget_typo"
  check "broken at boot: the journal names the bad key" \
    bash -c "journalctl -b -u nxdns --no-pager -o cat | grep -q budget_typo"
  check "broken at boot: the unit is not active" bash -c "! systemctl is-active --quiet nxdns"
  # systemd 252's status showed no line of nxdns's in the restart loop
  # (runs of 2026-12-03: none, or only systemd's own): the reason is in the
  # journal (checked above), and status is recorded, not required, to hold it
  # (docs/testing-vm.md, "What an operator sees").
  # The loop alternates between a try (activating (start), a second or two
  # under TCG) and the 2 s wait before the next, which is what status shows
  # as failing: poll for it (one run caught a try and failed the check).
  status_failing() {
    SYSTEMD_COLORS=0 systemctl status nxdns --no-pager >"$OUT/status-broken-default.txt" 2>&1
    grep -qE 'activating \(auto-restart\) \(Result: exit-code\)|failed \(Result: exit-code\)' "$OUT/status-broken-default.txt"
  }
  check "broken at boot: systemctl status says it is failing (auto-restart, exit-code)" poll 30 status_failing
  SYSTEMD_COLORS=0 systemctl status nxdns --no-pager -n 20 >"$OUT/status-broken.txt" 2>&1
  if grep -q budget_typo "$OUT/status-broken.txt"; then r=shows; else r="does not show"; fi
  echo "broken at boot: systemctl status -n 20 $r the problem line" >>"$OUT/timings"
  check "broken at boot: systemd keeps retrying (no start limit reached)" \
    bash -c "! systemctl show -p Result --value nxdns | grep -q start-limit"
  testconf >/etc/nxdns/nxdns.toml
  FAKEUP_HTTP=127.0.0.1:8081 fakeup_start vm-fakeup - "dot://127.0.0.2:853?latency=5ms"
  check "broken at boot: a fixed file is picked up by the next automatic retry" poll 60 systemctl is-active --quiet nxdns

  # ---- remove keeps /etc/nxdns, purge removes it and the state
  timeout 300 apt-get remove -y -q nxdns </dev/null >"$OUT/apt-remove.txt" 2>&1 || fail "remove" "$(tail -3 "$OUT/apt-remove.txt")"
  check "remove: /etc/nxdns/nxdns.toml is kept" test -f /etc/nxdns/nxdns.toml
  check "remove: the unit is gone and nothing listens on 53" \
    bash -c "! systemctl is-active --quiet nxdns && ! ss -lnu | grep -q ':53 '"
  timeout 300 apt-get purge -y -q nxdns </dev/null >"$OUT/apt-purge.txt" 2>&1 || fail "purge" "$(tail -3 "$OUT/apt-purge.txt")"
  check "purge: /etc/nxdns is removed" test ! -e /etc/nxdns
  check "purge: the state (/var/lib/private/nxdns, /var/lib/nxdns) is removed" \
    bash -c "[ ! -e /var/lib/private/nxdns ] && [ ! -L /var/lib/nxdns ] && [ ! -e /var/lib/nxdns ]"
  finish 0
fi
