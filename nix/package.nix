# nxdns, the DNS forwarder (cmd/nxdns). callPackage-style: the flake calls it
# with pkgs.callPackage for each system and with
# pkgs.pkgsCross.aarch64-multiplatform.callPackage for the Pi from x86_64.
{
  lib,
  buildGoModule,
  version ? "0.1.0",
  commit ? "unknown",
}:
let
  common = import ./common.nix { inherit lib version commit; };
in
buildGoModule {
  pname = "nxdns";
  inherit (common)
    version
    src
    vendorHash
    ldflags
    env
    ;

  subPackages = [ "cmd/nxdns" ];

  # buildGoModule's checkPhase tests only $subPackages when it is set; unset
  # it so every package's tests run (the pool, transports, config …). The
  # sandbox has loopback and nothing else, which is all nxdns's tests use;
  # the VM-scenario suite and the interop tests skip themselves when the
  # binaries or tools they drive are absent. HOME is unwritable in the
  # sandbox (/homeless-shelter).
  preCheck = ''
    unset subPackages
    export HOME=$TMPDIR
  '';
  # Builders are shared and loaded: tests that only measure long timings
  # check testing.Short() and leave those to CI and the VM tests.
  checkFlags = [ "-short" ];

  # The Go linker ignores an -X for a variable that does not exist, so prove
  # the stamp landed. Skipped automatically when cross-compiling.
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    $out/bin/nxdns version | grep -F -- ${lib.escapeShellArg version}
    runHook postInstallCheck
  '';

  meta = {
    description = "DNS forwarder for a home network with DoT/DoH upstreams and priority failover";
    homepage = "https://github.com/nxdns/nxdns";
    mainProgram = "nxdns";
    platforms = lib.platforms.linux;
  };
}
