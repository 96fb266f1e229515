#!/usr/bin/env bash
# The release path as a user meets it: scripts/release.sh builds the static
# binaries and the .deb; a second build from another directory with an empty
# Go build cache must give the same bytes; the .deb installs on this Debian,
# nxdns starts the way the packaged unit starts it (systemd when it runs here,
# otherwise the unit's own ExecStart line as an unprivileged user), answers
# kdig on loopback through a fake DoT upstream (never a public resolver), and
# is removed and purged cleanly.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if dpkg-query -W -f='${Status}' nxdns 2>/dev/null | grep -q "install ok"; then
    dpkg --purge nxdns >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

for p in knot-dnsutils util-linux curl; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || {
    apt-get update -qq && apt-get install -y -qq --no-install-recommends knot-dnsutils util-linux curl >/dev/null
    break
  }
done

echo "== release build"
commit=$(git rev-parse --short=12 HEAD)
epoch=$(git log -1 --format=%ct)
export VERSION=0.0.0-ci COMMIT=$commit SOURCE_DATE_EPOCH=$epoch # the copy below has no .git to read them from
OUT="$work/dist" ./scripts/release.sh
arch=$(dpkg --print-architecture)
deb="$work/dist/nxdns_0.0.0-ci_${arch}.deb"
bin="$work/dist/nxdns-0.0.0-ci-linux-${arch}"
test -f "$deb" -a -f "$bin"
if ldd "$bin" >/dev/null 2>&1; then echo "$bin is dynamically linked"; exit 1; fi

echo "== reproducible: another directory, an empty build cache"
mkdir -p "$work/src2"
git ls-files -z | xargs -0 -I{} cp --parents {} "$work/src2/"
(cd "$work/src2" && BUILD_GOCACHE="$work/gocache2" ARCHES="$arch" OUT="$work/dist2" ./scripts/release.sh >/dev/null)
for f in "nxdns-0.0.0-ci-linux-$arch" "nxdns_0.0.0-ci_$arch.deb"; do
  a=$(grep " $f\$" "$work/dist/SHA256SUMS") b=$(grep " $f\$" "$work/dist2/SHA256SUMS")
  if [ "$a" != "$b" ]; then echo "not reproducible: $a vs $b"; exit 1; fi
  echo "same: $a"
done
GOCACHE="$work/gocache2" go clean -cache # its files are read-only: rm alone fails
rm -rf "$work/src2" "$work/gocache2" "$work/dist2"

echo "== install"
apt-get install -y -qq "$deb" >/dev/null
test -x /usr/bin/nxdns
nxdns version | grep -q "^nxdns 0.0.0-ci " || { nxdns version; exit 1; }
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/nxdns.service
fi
nxdns check --config /etc/nxdns/nxdns.toml >/dev/null # the shipped example is valid

# The operator's configuration: loopback ports and a fake DoT upstream with
# its own CA, so nothing leaves the machine.
go build -o "$work/nxdns-fakeup" ./cmd/nxdns-fakeup
base=$(( 20000 + RANDOM % 20000 ))
dot_port=$base dns_port=$((base + 1)) web_port=$((base + 2)) fk_http=$((base + 3))
install -d -m 0755 /etc/nxdns/ci
"$work/nxdns-fakeup" -listen "dot://127.0.0.1:$dot_port" -ca-cert /etc/nxdns/ci/ca.pem -ca-key "$work/ca.key" \
  -cert-names "upstream.test" -http "127.0.0.1:$fk_http" 2>"$work/fakeup.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$fk_http/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
chmod 0644 /etc/nxdns/ci/ca.pem
cat >/etc/nxdns/nxdns.toml <<TOML
[dns]
listen = ["127.0.0.1:$dns_port"]
[web]
listen = "127.0.0.1:$web_port"
[[upstreams]]
url = "tls://127.0.0.1:$dot_port"
tls_name = "upstream.test"
ca_file = "/etc/nxdns/ci/ca.pem"
TOML

echo "== start"
if [ -d /run/systemd/system ]; then
  systemctl restart nxdns
  how="systemd"
else
  # No systemd here (a container): the unit's ExecStart, as nobody, as the
  # unit's dynamic user would run it.
  exec_start=$(sed -n 's/^ExecStart=//p' /lib/systemd/system/nxdns.service)
  read -r -a argv <<<"$exec_start"
  setpriv --reuid=nobody --regid=nogroup --clear-groups --no-new-privs "${argv[@]}" 2>"$work/nxdns.log" &
  pids+=($!)
  how="ExecStart as nobody: $exec_start"
fi
for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$web_port/api/health" >/dev/null 2>&1 && break; sleep 0.1; done
echo "started ($how)"

fail=0
for proto in +notcp +tcp; do
  out=$(kdig @127.0.0.1 -p "$dns_port" "$proto" +short +timeout=5 deb-check.example. A || true)
  if [[ "$out" =~ ^198\.1[89]\.[0-9]+\.[0-9]+$ ]]; then
    echo "kdig $proto: $out"
  else
    echo "kdig $proto: unexpected answer: '$out'"; fail=1
  fi
done
if [ "$fail" -ne 0 ]; then
  echo "--- nxdns log"; cat "$work/nxdns.log" 2>/dev/null || journalctl -u nxdns -n 50 --no-pager || true
  exit 1
fi

echo "== remove"
if [ -d /run/systemd/system ]; then systemctl stop nxdns; else kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; fi
rm -rf /etc/nxdns/ci
apt-get remove -y -qq nxdns >/dev/null
test ! -e /usr/bin/nxdns
test -e /etc/nxdns/nxdns.toml # remove keeps the operator's configuration
dpkg --purge nxdns >/dev/null
test ! -e /etc/nxdns/nxdns.toml
echo "deb check passed"
