# What nix/package.nix and nix/testbed.nix share: one source tree, one
# vendorHash, one version stamp (the version only: a commit stamp would make
# every commit, even one that touches only Nix or CI files, rebuild nxdns and
# re-run its Go tests; the flake's lock records which commit a system runs).
# Both build from the same go.mod, so the
# vendor/ directory (and its hash) is the same for both.
{
  lib,
  version,
}:
{
  inherit version;

  # The Go module without the Nix and CI files: editing module.nix or a VM
  # test must not rebuild nxdns and re-run its Go tests. Everything else stays
  # (docs/examples may be read by config tests). vmtests/ is a Go test
  # package (the scenario suite, which needs the real binary and runs in CI);
  # .ci/nix-check.sh hashes vendor/ with these same paths left out, so the
  # vendorHash matches this source, not the whole tree. Keep the two lists
  # in step. (lib.cleanSourceWith rather than
  # lib.fileset: the same result, and it also evaluates on the old Nix that
  # .ci/nix-check.sh has, which lacks builtins.readFileType.)
  src = lib.cleanSourceWith {
    name = "nxdns-source";
    src = lib.cleanSource ../.;
    filter =
      path: type:
      let
        rel = lib.removePrefix "${toString ../.}/" (toString path);
      in
      !(
        lib.hasSuffix ".nix" rel
        || lib.elem rel [
          "flake.lock"
          ".ci"
          "vmtests"
          "nix"
        ]
      );
  };

  vendorHash = import ./vendor-hash.nix;

  # -s -w: no symbol table or DWARF, as most Go packages in nixpkgs; the
  # binary is smaller on the Pi's SD card and stack traces keep their names.
  # The -X flag needs package internal/buildinfo to declare
  # `var Version string`; a wrong path is silently ignored by the Go linker,
  # which is why nix/package.nix checks `nxdns version` after install.
  ldflags = [
    "-s"
    "-w"
    "-X github.com/nxdns/nxdns/internal/buildinfo.Version=${version}"
  ];

  # A static binary: no libc to match on the Pi, and cross-compiling to
  # aarch64 needs no C cross toolchain.
  env.CGO_ENABLED = 0;
}
