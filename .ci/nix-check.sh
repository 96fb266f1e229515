#!/usr/bin/env bash
# The Nix checks that can run without nixpkgs (none can be fetched here):
#   1. every tracked .nix file parses (nix-instantiate --parse);
#   2. nix/vendor-hash.nix is the vendorHash of the tracked tree: a clean copy
#      of the git-tracked files, `go mod vendor`, `nix hash path vendor` —
#      exactly what buildGoModule's fixed-output goModules derivation hashes;
#   3. nixcheck (../shared/tools/nixcheck): module, flake outputs and VM-test
#      modules evaluated with nixpkgs' real lib against a stub of NixOS. It
#      needs nixpkgs' lib, which CI cannot fetch, so it runs only when
#      NIXCHECK_LIB (a nixpkgs lib/ directory) or NIXCHECK_MIRROR is set.
#
#   .ci/nix-check.sh                        check
#   .ci/nix-check.sh --update-vendor-hash   rewrite nix/vendor-hash.nix, then check
#
# What none of this proves (nothing is built, no VM runs): docs/nix.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
shared=${NXDNS_SHARED:-$root/../shared}
hashfile=nix/vendor-hash.nix
update=0
case "${1:-}" in
  --update-vendor-hash) update=1 ;;
  "") ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac

passed=0 failed=0 skipped=0
pass() { passed=$((passed + 1)); echo "nix-check: ok: $*"; }
fail() { failed=$((failed + 1)); echo "nix-check: FAIL: $*" >&2; }

# Debian's nix-bin has the two commands used here (nix-instantiate, nix hash);
# install it when missing (CI runs as root on a fresh machine).
if ! command -v nix-instantiate >/dev/null || ! command -v nix >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "nix-check: installing nix-bin" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nix-bin >&2
  else
    echo "nix-check: nix-instantiate and nix are needed (Debian: apt-get install nix-bin)" >&2
    exit 2
  fi
fi

# --- 1. syntax ---------------------------------------------------------------
mapfile -d '' nixfiles < <(git ls-files -z -- '*.nix')
bad=0
for f in "${nixfiles[@]}"; do
  if ! out=$(nix-instantiate --parse "$f" 2>&1 >/dev/null); then
    echo "$out" >&2
    bad=$((bad + 1))
  fi
done
if [ "${#nixfiles[@]}" -eq 0 ]; then
  fail "no tracked .nix files"
elif [ "$bad" -eq 0 ]; then
  pass "${#nixfiles[@]} tracked .nix files parse"
else
  fail "$bad of ${#nixfiles[@]} .nix files do not parse"
fi

# --- 2. vendorHash -------------------------------------------------------------
# What buildGoModule vendors: the tracked files (with their working-tree
# content, so an uncommitted go.mod edit is seen, as `nix build` would),
# less what nix/common.nix's `src` filter leaves out — every .nix file,
# flake.lock, .ci/, nix/ and vmtests/. vmtests/ is a Go test package: an
# import only it makes would change vendor/modules.txt for the whole tree
# but not for the Nix build, so hashing the whole tree could pass here and
# fail in `nix build`.
nix_src_excluded() {
  case "$1" in
    *.nix | flake.lock | .ci/* | nix/* | vmtests/*) return 0 ;;
  esac
  return 1
}
vendor_hash() {
  local tmp rc=0
  tmp=$(mktemp -d)
  git ls-files -z --cached | while IFS= read -r -d '' f; do
    [ -e "$f" ] || continue
    nix_src_excluded "$f" && continue
    mkdir -p "$tmp/src/$(dirname "$f")"
    cp -P "$f" "$tmp/src/$f"
  done
  (
    cd "$tmp/src"
    if [ -d vendor ]; then
      echo "vendor/ is tracked: the expression needs vendorHash = null" >&2
      exit 3
    fi
    # As the goModules derivation does: no workspace, no toolchain download,
    # no inherited GOFLAGS. The Go module proxy is used to fetch modules.
    export GOWORK=off GO111MODULE=on GOTOOLCHAIN=local GOFLAGS=
    go mod vendor >&2
    if [ -z "$(ls -A vendor 2>/dev/null)" ]; then
      echo null # no dependencies: buildGoModule wants vendorHash = null
    else
      echo "\"$(nix --extra-experimental-features nix-command hash path vendor)\""
    fi
  ) || rc=$?
  chmod -R u+w "$tmp" 2>/dev/null || true
  rm -rf "$tmp"
  return "$rc"
}

if ! command -v go >/dev/null; then
  fail "go not found: cannot compute the vendorHash"
elif ! want=$(vendor_hash); then
  fail "could not compute the vendorHash (see above)"
else
  have=$(nix-instantiate --eval "$hashfile" 2>/dev/null || echo "<unreadable>")
  if [ "$have" != "$want" ] && [ "$update" = 1 ]; then
    tmpf=$(mktemp)
    grep '^#' "$hashfile" >"$tmpf" || true
    echo "$want" >>"$tmpf"
    mv "$tmpf" "$hashfile"
    echo "nix-check: $hashfile updated: $have -> $want"
    have=$want
  fi
  if [ "$have" = "$want" ]; then
    pass "vendorHash $want matches the tracked tree"
  else
    fail "$hashfile says $have but the tracked tree vendors to $want
    fix: put $want as the value in $hashfile (or run .ci/nix-check.sh --update-vendor-hash)"
  fi
fi

# --- 3. nixcheck -------------------------------------------------------------
nixcheck=$shared/tools/nixcheck/nixcheck.sh
if [ -z "${NIXCHECK_LIB:-}" ] && [ -z "${NIXCHECK_MIRROR:-}" ]; then
  skipped=$((skipped + 1))
  echo "nix-check: skipped nixcheck: it needs nixpkgs' lib (set NIXCHECK_LIB to a nixpkgs lib/ directory, or NIXCHECK_MIRROR)"
elif [ ! -x "$nixcheck" ] && [ ! -f "$nixcheck" ]; then
  fail "NIXCHECK_LIB/NIXCHECK_MIRROR set but $nixcheck is missing"
elif bash "$nixcheck" "$root" -q; then
  pass "nixcheck clean"
else
  fail "nixcheck reported errors (above)"
fi

echo "nix-check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
