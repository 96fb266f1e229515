#!/usr/bin/env bash
# The Pi's binary, checked without a Pi: cross-compile nxdns for linux/arm64
# (CGO off, as the Nix package builds it) and run it under qemu-user:
#   1. `nxdns version`;
#   2. `nxdns check --config docs/examples/nxdns.toml` (exit 0: valid);
#   3. `go test ./internal/config/` compiled for arm64 and run under qemu
#      (config parsing and validation, the code every Pi runs at start-up);
#   4. the UDP batch, pktinfo and fast-path tests of internal/server, the
#      same way (the kernel structures they build are laid out per
#      architecture);
#   5. the 32-bit targets (older Pis' armv6/v7 as GOARCH=arm GOARM=6, and
#      386), where int is 32 bits: `go vet ./...` for both (it type-checks
#      the tests too, so a constant past a 32-bit int fails here, not on a
#      user's Pi), and nxdns, the config tests, the UDP batch tests of 4.
#      (32-bit kernel structures) and the tests that hold 32-bit
#      regressions run for arm under qemu-arm.
# Needs Debian's qemu-user-static (installed here when missing, as root).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
qemu=qemu-aarch64-static
qemu32=qemu-arm-static # the same Debian package

if ! command -v "$qemu" >/dev/null || ! command -v "$qemu32" >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "arm64: installing qemu-user-static" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user-static >&2
  else
    echo "arm64: $qemu is needed (Debian: apt-get install qemu-user-static)" >&2
    exit 2
  fi
fi
for need in cmd/nxdns internal/config docs/examples/nxdns.toml; do
  [ -e "$need" ] || { echo "arm64: $need is missing" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export CGO_ENABLED=0 GOOS=linux GOARCH=arm64

passed=0 failed=0
step() {
  local what=$1
  shift
  if "$@"; then
    passed=$((passed + 1))
    echo "arm64: ok: $what"
  else
    failed=$((failed + 1))
    echo "arm64: FAIL: $what" >&2
  fi
}

go build -o "$tmp/nxdns" ./cmd/nxdns
# The ELF header's machine field (bytes 18-19, little-endian) is 0xb7 for
# AArch64: prove the cross-compile happened before trusting qemu's verdicts.
step "built an AArch64 ELF" test "$(od -An -tx1 -j18 -N2 "$tmp/nxdns" | tr -d ' \n')" = "b700"
step "nxdns version" "$qemu" "$tmp/nxdns" version
step "nxdns check --config docs/examples/nxdns.toml" \
  "$qemu" "$tmp/nxdns" check --config docs/examples/nxdns.toml
step "go test ./internal/config/ (arm64 under qemu)" \
  go test -count=1 -exec "$qemu" ./internal/config/
# The UDP batches hand the kernel its own structures (mmsghdr, msghdr,
# sockaddrs, control messages), whose layout is the architecture's: read and
# answer real datagrams with the Pi's. (Not the kernel drop-count test:
# qemu-user does not pass SO_RXQ_OVFL on.)
step "go test -run 'Mmsg|Pktinfo|PacketDst|FastPath|UDPBatch' ./internal/server/ (arm64 under qemu)" \
  go test -count=1 -exec "$qemu" -run 'Mmsg|Pktinfo|PacketDst|FastPath|UDPBatch' ./internal/server/

# 32-bit: the same checks would not catch an int that overflows at 2^31.
step "go vet ./... for GOARCH=arm" env GOARCH=arm GOARM=6 go vet ./...
step "go vet ./... for GOARCH=386" env GOARCH=386 go vet ./...
GOARCH=arm GOARM=6 go build -o "$tmp/nxdns-arm" ./cmd/nxdns
# e_machine 0x28 is ARM (32-bit).
step "built an ARM (32-bit) ELF" test "$(od -An -tx1 -j18 -N2 "$tmp/nxdns-arm" | tr -d ' \n')" = "2800"
step "nxdns check --config docs/examples/nxdns.toml (arm)" \
  "$qemu32" "$tmp/nxdns-arm" check --config docs/examples/nxdns.toml
step "go test ./internal/config/ (arm under qemu)" \
  env GOARCH=arm GOARM=6 go test -count=1 -exec "$qemu32" ./internal/config/
step "go test -run 'Mmsg|Pktinfo|PacketDst|FastPath|UDPBatch' ./internal/server/ (arm under qemu)" \
  env GOARCH=arm GOARM=6 go test -count=1 -exec "$qemu32" -run 'Mmsg|Pktinfo|PacketDst|FastPath|UDPBatch' ./internal/server/
step "go test -run 'budgetFits|hugeFailureCount' ./internal/history/ (arm under qemu)" \
  env GOARCH=arm GOARM=6 go test -count=1 -exec "$qemu32" -run 'budgetFits|hugeFailureCount' ./internal/history/
step "go test -run 'CacheFile_badFiles' ./internal/cache/ (arm under qemu)" \
  env GOARCH=arm GOARM=6 go test -count=1 -exec "$qemu32" -run 'CacheFile_badFiles' ./internal/cache/

echo "arm64: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
