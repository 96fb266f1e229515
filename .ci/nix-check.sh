#!/usr/bin/env bash
# The Nix checks that can run without nixpkgs (none can be fetched here):
#   1. every tracked .nix file parses (nix-instantiate --parse);
#   2. nix/vendor-hash.nix is the vendorHash of the tracked tree: a clean copy
#      of the git-tracked files, `go mod vendor`, `nix hash path vendor` —
#      exactly what buildGoModule's fixed-output goModules derivation hashes;
#   3. the module's build-time check with the real binary: `nxdns check` —
#      the binary built from this tree — accepts the TOML module.nix renders
#      for each sample (vmtests/golden/*.toml, rendered by nixcheck and
#      committed; nix/nix_test.go fails when they are stale). This is the check `services.nxdns.enable = true;`
#      alone used to fail at system build time;
#   4. nixcheck (../shared/tools/nixcheck): module, flake outputs and VM-test
#      modules evaluated with nixpkgs' real lib against a stub of NixOS, the
#      module's system.checks run with the real binary, and the golden files
#      re-rendered and compared. It needs nixpkgs' lib, which CI cannot
#      fetch, so it runs only when NIXCHECK_LIB (a nixpkgs lib/ directory) or
#      NIXCHECK_MIRROR is set.
#
#   .ci/nix-check.sh                        check
#   .ci/nix-check.sh --update-vendor-hash   rewrite nix/vendor-hash.nix, then check
#
# What none of this proves (nothing is built, no VM runs): docs/nix.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
shared=${NXDNS_SHARED:-$root/../shared}
[ -d "$shared" ] || shared=$root/../../shared # a worktree under /work/wt/
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

# --- 3. the module's build-time check, with the real binary ---------------
bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
nxdns_bin=$bindir/nxdns
if ! command -v go >/dev/null || ! CGO_ENABLED=0 go build -o "$nxdns_bin" ./cmd/nxdns; then # as nix/common.nix builds it
  fail "could not build cmd/nxdns for the module's check"
  nxdns_bin=
fi
for sample in minimal sample; do
  golden=vmtests/golden/$sample.toml
  [ "$sample" = sample ] && golden=vmtests/golden/full.toml
  if [ ! -f "$golden" ]; then
    fail "$golden is missing: run vmtests/golden/regenerate.sh"
    continue
  fi
  if [ -n "$nxdns_bin" ]; then
    if out=$("$nxdns_bin" check --config "$golden" 2>&1); then
      pass "nxdns check accepts $golden (the module's build-time check)"
    else
      fail "nxdns check rejects $golden, so the module's system build would fail:
$out"
    fi
  fi
done

# --- 4. nixcheck -------------------------------------------------------------
nixcheck=$shared/tools/nixcheck/nixcheck.sh
if [ -z "${NIXCHECK_LIB:-}" ] && [ -z "${NIXCHECK_MIRROR:-}" ]; then
  skipped=$((skipped + 1))
  echo "nix-check: skipped nixcheck: it needs nixpkgs' lib (set NIXCHECK_LIB to a nixpkgs lib/ directory, or NIXCHECK_MIRROR)"
elif [ ! -x "$nixcheck" ] && [ ! -f "$nixcheck" ]; then
  fail "NIXCHECK_LIB/NIXCHECK_MIRROR set but $nixcheck is missing"
else
  binopt=()
  [ -n "$nxdns_bin" ] && binopt=(--nxdns-bin "$nxdns_bin")
  # The tree exactly as cloned: every flake output must evaluate (the Pi
  # system is a template, templates/pi, so nothing demands a key here).
  for sample in vmtests/nixcheck-sample.nix vmtests/nixcheck-minimal.nix; do
    flake=()
    [ "$sample" != vmtests/nixcheck-sample.nix ] && flake=(--no-flake) # the flake once is enough
    if bash "$nixcheck" "$root" -q --config "$root/$sample" "${binopt[@]}" "${flake[@]}"; then
      pass "nixcheck clean as cloned with $sample"
    else
      fail "nixcheck reported errors with $sample (above)"
    fi
  done
  # The `pi` template as `nix flake init -t .#pi` gives it, with
  # nxdns = this tree: a shim flake calls the template's outputs with this
  # flake's outputs as its `nxdns` input (nixcheck fakes only nixpkgs). With
  # a key in configuration.nix (docs/how-to/deploy-on-a-pi.md, step 1) it
  # must be clean; as shipped, refused by the SSH-key assertion alone.
  tpl=$(mktemp -d)
  cp -r templates/pi "$tpl/pi"
  cp flake.lock "$tpl/"
  cat >"$tpl/flake.nix" <<NIX
{
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";
  outputs =
    { self, nixpkgs }:
    let
      nxdns = (import $root/flake.nix).outputs { self = nxdns // { outPath = "$root"; }; inherit nixpkgs; };
    in
    (import ./pi/flake.nix).outputs { inherit self nixpkgs nxdns; };
}
NIX
  (cd "$tpl" && git init -q && git add -A)
  tplcheck() { bash "$nixcheck" "$tpl" -q --module "$root/module.nix" --config "$root/vmtests/nixcheck-minimal.nix" "${binopt[@]}" 2>&1; }
  if out=$(tplcheck); then
    fail "nixcheck accepted the pi template without an SSH key"
  elif grep -q "no SSH key" <<<"$out" && grep -q "^  1 error(s)" <<<"$out"; then
    pass "the pi template without an SSH key is refused by its assertion, and only by it"
  else
    echo "$out" >&2
    fail "the pi template without a key: want exactly the SSH-key assertion (above)"
  fi
  sed -i 's|^  users.users.root.openssh.authorizedKeys.keys = \[$|&\n    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINixcheckPlaceholderKeyNeverInAnImage nix-check"|' "$tpl/pi/configuration.nix"
  if ! grep -q PlaceholderKey "$tpl/pi/configuration.nix"; then
    fail "could not put a key into the pi template's configuration.nix (its keys line changed?)"
  elif out=$(tplcheck); then
    pass "the pi template with a key evaluates clean (nixosConfigurations.pi, sd-image)"
  else
    echo "$out" >&2
    fail "the pi template with a key has errors (above)"
  fi
  rm -rf "$tpl"
  if NXDNS_SHARED=$shared vmtests/golden/regenerate.sh --check; then
    pass "vmtests/golden/*.toml are what module.nix renders"
  else
    fail "vmtests/golden/*.toml are stale (above): run vmtests/golden/regenerate.sh"
  fi
fi

echo "nix-check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
