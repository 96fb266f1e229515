#!/usr/bin/env bash
# Renders what module.nix makes of each nixcheck sample
# (vmtests/nixcheck-sample.nix → full.*, vmtests/nixcheck-minimal.nix →
# minimal.*) and writes it here: the TOML file (NAME.toml) and the systemd
# unit (unit-NAME.json, store paths replaced by <store>), each naming the
# SHA-256 of the inputs it was rendered from.
#
# Why: nothing Nix can be built in CI (no nixpkgs), but the module's
# build-time check — `nxdns check` on the file the module generates — is what
# let `services.nxdns.enable = true;` alone fail the system build. CI
# (.ci/nix-check.sh) runs the real binary's check on these files, and fails
# when their header no longer matches module.nix and the sample (edit either,
# then run this script).
#
#   NIXCHECK_LIB=/path/to/nixpkgs.lib/lib vmtests/golden/regenerate.sh [--check]
#
# --check renders to a temporary directory and fails if a committed file
# differs. nixpkgs' lib: fetch github nix-community/nixpkgs.lib and extract
# it (`git archive HEAD | tar -x -C /tmp/nixlib`; never commit it).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
shared=${NXDNS_SHARED:-$root/../shared}
[ -d "$shared" ] || shared=$root/../../shared # a worktree under /work/wt/
nixcheck=$shared/tools/nixcheck/nixcheck.sh
check=0
[ "${1:-}" = --check ] && check=1

if [ -z "${NIXCHECK_LIB:-}" ] && [ -z "${NIXCHECK_MIRROR:-}" ]; then
  echo "regenerate: set NIXCHECK_LIB to a nixpkgs lib/ directory (or NIXCHECK_MIRROR)" >&2
  exit 2
fi

# inputs_hash NAME: the SHA-256 of module.nix and the sample, the header's value.
inputs_hash() {
  cat "$root/module.nix" "$root/vmtests/nixcheck-$1.nix" | sha256sum | cut -d' ' -f1
}

out=$here
[ "$check" = 1 ] && out=$(mktemp -d)
rc=0
for name in minimal sample; do
  golden=$name
  [ "$name" = sample ] && golden=full
  json=$(mktemp)
  bash "$nixcheck" "$root" --no-flake -q --config "$root/vmtests/nixcheck-$name.nix" --json "$json" >/dev/null
  src=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["module"]["etc"]["nxdns/nxdns.toml"]["source"])' "$json")
  python3 - "$json" "$(inputs_hash "$name")" >"$out/unit-$golden.json" <<'PY'
import json, re, sys
unit = json.load(open(sys.argv[1]))["module"]["units"]["nxdns"]
keep = {k: unit[k] for k in ("description", "wantedBy", "wants", "after", "before", "unitConfig", "serviceConfig")}
text = re.sub(r"/nix/store/[0-9a-z]{32}-[^\"/ ]*", "<store>", json.dumps(keep, indent=2, sort_keys=True))
out = {"_rendered_by": "vmtests/golden/regenerate.sh; do not edit", "_inputs_sha256": sys.argv[2]}
out.update(json.loads(text))
print(json.dumps(out, indent=2, sort_keys=True))
PY
  rm -f "$json"
  {
    echo "# Rendered by vmtests/golden/regenerate.sh from module.nix and"
    echo "# vmtests/nixcheck-$name.nix: do not edit; CI runs \`nxdns check\` on it."
    echo "# inputs-sha256: $(inputs_hash "$name")"
    cat "$src"
  } >"$out/$golden.toml"
  if [ "$check" = 1 ]; then
    for f in "$golden.toml" "unit-$golden.json"; do
      if ! diff -u "$here/$f" "$out/$f"; then
        echo "regenerate: $f is stale: run vmtests/golden/regenerate.sh" >&2
        rc=1
      fi
    done
  fi
done
[ "$check" = 1 ] && rm -rf "$out"
exit "$rc"
