#!/usr/bin/env bash
# Real-browser tests of the dashboard (browsertest/): Debian's chromium,
# headless, driven by chromedp against the real nxdns binary with real DNS
# traffic from kdig. Its own Go module, so chromedp never enters nxdns's
# go.mod. Bounded: the test has its own step timeouts, and go test -timeout.
#   .ci/browser.sh                 run the tests
#   .ci/browser.sh --screenshots   also rewrite docs/img/*.png
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v kdig >/dev/null || missing+=(knot-dnsutils)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--screenshots" ]; then
  export NXDNS_SCREENSHOTS="$PWD/docs/img"
  mkdir -p "$NXDNS_SCREENSHOTS"
fi
cd browsertest
go mod download
go vet ./...
go test -count=1 -timeout 5m ./...
