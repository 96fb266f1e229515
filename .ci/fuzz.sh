#!/usr/bin/env bash
# The fuzz targets (docs/design.md#fuzzing), each for a bounded number of
# inputs: about a minute and a half in all on CI (every target docs/design.md#fuzzing names: the query parser and
# handler over UDP and DoH, the config loader, the cache file, the fast path's query reader, a UDP read's control messages, the local
# records and the list parser). The seed corpora live in each package's testdata/fuzz/<Target>
# and run as ordinary tests in scripts/test.sh too; an input the fuzzer finds
# failing is written there by go test, and committing it makes it a
# regression test case.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each target runs a number of inputs, not a number of seconds: with a
# duration, Go 1.26's fuzz coordinator can report its own deadline as a
# failure ("context deadline exceeded", no failing input written) when the
# time runs out while a worker is busy (golang/go#75804, fixed in Go 1.27).
# The counts are about the seconds they replace on the 2-core CI machine;
# -timeout bounds a slower machine.
fuzz() { # package target inputs
  echo "-- $2 ($1) for $3 inputs"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "${3}x" -parallel 2 -timeout 5m "$1"
}

fuzz ./internal/server FuzzHandle 90000        # ~20 s
fuzz ./internal/server FuzzServeDoH 20000      # ~10 s
fuzz ./internal/config FuzzLoad 20000          # ~10 s
fuzz ./internal/cache FuzzDecode 20000         # ~10 s
fuzz ./internal/local FuzzNew 12000            # ~10 s
fuzz ./internal/filter FuzzParse 80000         # ~15 s
fuzz ./internal/wireform FuzzParseQuery 200000 # ~10 s: the fast path reads what miekg/dns reads
fuzz ./internal/server FuzzControlMessages 50000 # ~5 s: a UDP read's control messages, walked in place
fuzz ./internal/devices FuzzParseLeases 50000  # ~5 s: the DHCP lease files of docs/devices.md
