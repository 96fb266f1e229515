#!/usr/bin/env bash
# The real binary answering a real client nobody here wrote: nxdns forwards
# to a fake DoT upstream (nxdns-fakeup, its own test CA) and kdig (Knot DNS)
# queries nxdns over UDP and TCP. The fake upstream answers A queries with a
# deterministic address in 198.18.0.0/15, which kdig must print.
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

. scripts/lib.sh # bench_build: the binaries as the packages build them (no cgo)
bench_build nxdns nxdns-fakeup

# Ports in the high loopback range, chosen per run to avoid collisions.
base=$(( 20000 + RANDOM % 20000 ))
dot_port=$base dns_port=$((base + 1)) web_port=$((base + 2)) fk_http=$((base + 3))

"$work/nxdns-fakeup" -listen "dot://127.0.0.1:$dot_port" -ca-cert "$work/ca.pem" -ca-key "$work/ca.key" \
  -cert-names "upstream.test,127.0.0.1" -http "127.0.0.1:$fk_http" 2>"$work/fakeup.log" &
pids+=($!)

cat >"$work/nxdns.toml" <<TOML
[dns]
listen = ["127.0.0.1:$dns_port"]
[web]
listen = "127.0.0.1:$web_port"
[[upstreams]]
url = "tls://127.0.0.1:$dot_port"
tls_name = "upstream.test"
ca_file = "$work/ca.pem"
TOML

# nxdns-fakeup writes the CA before it listens; wait for its counters endpoint.
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$fk_http/healthz" >/dev/null 2>&1 && break
  sleep 0.1
done
"$work/nxdns" check --config "$work/nxdns.toml"
"$work/nxdns" check --probe --config "$work/nxdns.toml"

"$work/nxdns" run --config "$work/nxdns.toml" 2>"$work/nxdns.log" &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q '"serving"\|serving' "$work/nxdns.log" 2>/dev/null && break
  sleep 0.1
done

fail=0
for proto in +notcp +tcp; do
  out=$(kdig @127.0.0.1 -p "$dns_port" "$proto" +short +timeout=5 kdig-check.example. A || true)
  if [[ "$out" =~ ^198\.1[89]\.[0-9]+\.[0-9]+$ ]]; then
    echo "kdig $proto: $out"
  else
    echo "kdig $proto: unexpected answer: '$out'"; fail=1
  fi
done
status=$(kdig @127.0.0.1 -p "$dns_port" +tcp +timeout=5 kdig-check.example. AAAA | grep -o 'status: [A-Z]*' || true)
echo "kdig AAAA: $status"
[ "$status" = "status: NOERROR" ] || fail=1

if [ "$fail" -ne 0 ]; then
  echo "--- nxdns log"; cat "$work/nxdns.log"; echo "--- fakeup log"; cat "$work/fakeup.log"
  exit 1
fi
echo "binary check passed"
