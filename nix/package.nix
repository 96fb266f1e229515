# nxdns, the DNS forwarder (cmd/nxdns). callPackage-style: the flake calls it
# with pkgs.callPackage for each system and with
# pkgs.pkgsCross.aarch64-multiplatform.callPackage for the Pi from x86_64.
{
  lib,
  buildGoModule,
  version ? "0.1.0",
}:
let
  common = import ./common.nix { inherit lib version; };

  # Builders are shared and loaded, and a few tests bound a duration from
  # above against one round trip (a burst in about one RTT, a budget spent
  # once, not twice): on a busy builder they fail for the builder's sake, not
  # nxdns's. They run in CI (scripts/test.sh) and their claims in the VM
  # tests; here they are skipped by name. (-short would skip nothing: only
  # the scenario suite in vmtests/, which is not in this source, checks it.)
  # nix/nix_test.go checks that every name still names a test.
  wallClockTests = [
    "TestDoT_burstCompletesInAboutOneRoundTrip"
    "TestDoH_multiplexesConcurrentExchangesOnOneConnection"
    "TestDoH_abandonsSilentConnectionWithinPingBounds"
    "TestDoT_pipelinedAnswersLeaveAsTheirLatencyEnds"
    "TestResolve_TruncatedThenStalledTCPCostsOneBudget"
    "TestResolve_ForeignStreamCannotExtendDeadline"
  ];
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
  checkFlags = [ "-skip=^(${lib.concatStringsSep "|" wallClockTests})$" ];

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
