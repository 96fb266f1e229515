#!/usr/bin/env bash
# DNS over QUIC interop with CoreDNS, both directions (vmtests
# TestUpstreamDoQCoreDNS, TestServedDoQCoreDNS; docs/server.md "DNS over
# QUIC"): builds CoreDNS v1.15.0 with only the plugins the tests use from
# the separate module scripts/interop/coredns (never part of nxdns's own
# go.mod; why this and not `go install github.com/coredns/coredns@v1.15.0`:
# docs/decisions/quic-library.md, "Interop with CoreDNS"), then runs the
# tests against the real nxdns binary with NXDNS_COREDNS set, so a missing
# or broken CoreDNS fails them instead of skipping.
#
# The binary is cached by content in NXDNS_INTEROP_CACHE (default
# ~/.cache/nxdns-interop): its name carries a hash of the module's go.mod,
# go.sum and main.go and of the Go version, so a change to any of them
# builds anew and an unchanged one is reused.
#
# Measured on 2026-12-03 on 2 cores shared with other builds (load ~12):
# the build 264 s with the Go module cache already holding its modules
# (a fresh machine downloads them first), 0 s from the cache; the tests
# 16 s, the nxdns binary's build included.
set -euo pipefail
cd "$(dirname "$0")/.."

mod=scripts/interop/coredns
cache=${NXDNS_INTEROP_CACHE:-$HOME/.cache/nxdns-interop}
key=$( (cat "$mod/go.mod" "$mod/go.sum" "$mod/main.go"; go version) | sha256sum | cut -c1-16)
bin=$cache/coredns-$key
start=$(date +%s)
if [ -x "$bin" ]; then
  echo "interop: CoreDNS from the cache ($bin)"
else
  mkdir -p "$cache"
  # GOWORK/GOFLAGS: the nested module alone, checked against its go.sum.
  (cd "$mod" && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" .)
  mv "$bin.tmp" "$bin"
  # Older builds of the module are of no further use.
  find "$cache" -maxdepth 1 -name 'coredns-*' ! -name "coredns-$key" -delete
  echo "interop: built CoreDNS in $(($(date +%s) - start)) s"
fi
"$bin" -version

start=$(date +%s)
NXDNS_COREDNS=$bin go test -count=1 -timeout 5m -run 'CoreDNS$' ./vmtests/
echo "interop: CoreDNS tests passed in $(($(date +%s) - start)) s"
