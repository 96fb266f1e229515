# The scenario tools the VM tests drive: nxdns-fakeup (fake DoT/DoH/UDP/TCP
# upstream with latency, stall, truncation …) and nxdns-burst (concurrent
# query client that prints one JSON summary).
#
# A separate package rather than a second output of nix/package.nix: the Pi
# installs nxdns alone, and test tooling — a fake upstream that issues
# certificates from a CA key it is given — has no business in a resolver's
# closure. The two share source, version and vendorHash (nix/common.nix);
# the Go tests run once, in nix/package.nix.
{
  lib,
  buildGoModule,
  version ? "0.1.0",
}:
let
  common = import ./common.nix { inherit lib version; };
in
buildGoModule {
  pname = "nxdns-testbed";
  inherit (common)
    version
    src
    vendorHash
    ldflags
    env
    ;

  subPackages = [
    "cmd/nxdns-fakeup"
    "cmd/nxdns-burst"
  ];

  doCheck = false;

  meta = {
    description = "Fake DNS upstreams and a burst client for nxdns's VM tests";
    homepage = "https://github.com/nxdns/nxdns";
    mainProgram = "nxdns-burst";
    platforms = lib.platforms.linux;
  };
}
