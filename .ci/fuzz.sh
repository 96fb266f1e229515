#!/usr/bin/env bash
# The fuzz targets (SPEC §9 "Fuzzing"), each for a bounded time: a minute in
# and a quarter in all on CI (every target SPEC §9 names: the query parser and
# handler over UDP and DoH, the config loader, the cache file, the fast path's query reader, a UDP read's control messages, the local
# records and the list parser). The seed corpora live in each package's testdata/fuzz/<Target>
# and run as ordinary tests in scripts/test.sh too; an input the fuzzer finds
# failing is written there by go test, and committing it makes it a
# regression test case.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz() { # package target seconds
  echo "-- $2 ($1) for $3 s"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$3s" -parallel 2 "$1"
}

fuzz ./internal/server FuzzHandle 20
fuzz ./internal/server FuzzServeDoH 10
fuzz ./internal/config FuzzLoad 10
fuzz ./internal/cache FuzzDecode 10
fuzz ./internal/local FuzzNew 10
fuzz ./internal/filter FuzzParse 15
fuzz ./internal/wireform FuzzParseQuery 10 # the fast path reads what miekg/dns reads
fuzz ./internal/server FuzzControlMessages 5 # a UDP read's control messages, walked in place
