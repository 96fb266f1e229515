#!/usr/bin/env bash
# The comparison behind docs/cache.md: a hand-written CLOCK store against
# maypok86/otter/v2 and hashicorp/golang-lru/v2 (LRU and 2Q) on hit cost,
# insert cost at the bound, memory per entry and keeping hot names under a
# flood. Runs in a nested throwaway module, so nxdns itself never depends on
# the candidates. Bounded: a few seconds per benchmark.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$here/cache-compare
cd "$dir"
go mod tidy >/dev/null 2>&1 || true
go test -run 'HotNames' -v -count=1 . | grep -E 'miss rate|FAIL|ok'
go test -run '^$' -bench 'MemoryPerEntry' -benchtime=1x -count=1 .
go test -run '^$' -bench 'Hit|InsertAtBound' -benchtime=${BENCHTIME:-1s} -count=${COUNT:-1} .
