#!/usr/bin/env bash
# The fuzz targets (SPEC §9 "Fuzzing"), each for a bounded time: a minute in
# all on CI. The seed corpora live in each package's testdata/fuzz/<Target>
# and run as ordinary tests in scripts/test.sh too; an input the fuzzer finds
# failing is written there by go test, and committing it makes it a
# regression test case.
set -euo pipefail
cd "$(dirname "$0")/.."

fuzz() { # package target seconds
  echo "-- $2 ($1) for $3 s"
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$3s" -parallel 2 "$1"
}

fuzz ./internal/server FuzzHandle 40
fuzz ./internal/config FuzzLoad 20
