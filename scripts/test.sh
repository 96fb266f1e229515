#!/usr/bin/env bash
# The project's test command (README "Run the tests"): formatting, vet,
# staticcheck and the exhaustive analyzer at pinned versions through the Go
# module proxy, then every test under the race detector in shuffled order,
# and the allocation-counting tests once more without it.
# Any failure fails the whole run.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
EXHAUSTIVE=github.com/nishanths/exhaustive/cmd/exhaustive@v0.17.1

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "staticcheck ($STATICCHECK)"
go run "$STATICCHECK" ./...

step "exhaustive ($EXHAUSTIVE)"
# Every switch over an enum (upstream.Kind, upstream.Group, ...) names each
# value or says default on purpose: a new error kind cannot fall through.
go run "$EXHAUSTIVE" -d -constignore 'kindEnd$' -typeonly '^github.com/nxdns/nxdns/' ./...

step "go test -race -shuffle=on"
go test -race -shuffle=on -timeout 15m ./...

step "allocation counts without -race"
# The race detector makes sync.Pool drop items at random, so a test that
# counts the allocations of code reusing through a pool skips under it
# (raceEnabled); the tests named for allocations run here once more without.
go test -count=1 -run 'Allocat' ./...
