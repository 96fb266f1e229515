{
  description = "nxdns: a DNS forwarder for a home network, with DoT/DoH upstreams and priority failover, for NixOS on a Raspberry Pi";

  # Must stay byte-identical to flake.lock's `original` (owner, repo, ref and
  # their case), or Nix re-locks and moves the pin.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      # Stamped into `nxdns version`; a dirty tree says so.
      stamp = {
        commit = self.shortRev or self.dirtyShortRev or "unknown";
      };

      vmTest = pkgs: file: pkgs.testers.runNixOSTest (import file { inherit self pkgs; });
      vmTests = pkgs: {
        burst = vmTest pkgs ./vmtests/burst.nix;
        saturated-primary = vmTest pkgs ./vmtests/saturated-primary.nix;
        fast-standby = vmTest pkgs ./vmtests/fast-standby.nix;
      };
    in
    {
      packages = forAllSystems (
        pkgs:
        let
          nxdns = pkgs.callPackage ./nix/package.nix stamp;
        in
        {
          default = nxdns;
          inherit nxdns;
          nxdns-testbed = pkgs.callPackage ./nix/testbed.nix stamp;
        }
        // lib.optionalAttrs (pkgs.stdenv.hostPlatform.system == "x86_64-linux") {
          # The Pi's binary cross-compiled on a PC (CGO off: no C toolchain).
          nxdns-aarch64 = pkgs.pkgsCross.aarch64-multiplatform.callPackage ./nix/package.nix stamp;
        }
        // lib.optionalAttrs (pkgs.stdenv.hostPlatform.system == "aarch64-linux") {
          # `nix build .#sd-image` on an aarch64 machine (or an x86_64 one
          # with an aarch64 remote builder or binfmt emulation).
          sd-image = self.nixosConfigurations.pi.config.system.build.sdImage;
        }
      );

      # module.nix plus a default for services.nxdns.package, which nixpkgs
      # cannot provide (there is no pkgs.nxdns). The default is this flake's
      # build for the system's platform, built with this flake's nixpkgs pin
      # (its Go); for a cross-compiled system it is built with the system's
      # own pkgs, which cross-compiles.
      nixosModules.default =
        { lib, pkgs, ... }:
        let
          inherit (pkgs.stdenv) hostPlatform buildPlatform;
          native = buildPlatform.system == hostPlatform.system;
        in
        {
          key = "nxdns#nixosModules.default";
          _file = ./flake.nix;
          imports = [ ./module.nix ];
          services.nxdns.package = lib.mkDefault (
            if native && self.packages ? ${hostPlatform.system} then
              self.packages.${hostPlatform.system}.nxdns
            else
              pkgs.callPackage ./nix/package.nix stamp
          );
        };
      nixosModules.nxdns = self.nixosModules.default;

      # The SPEC §10 scenarios as NixOS VM tests (they need KVM). aarch64 too:
      # the tests are platform-neutral and the Pi's platform is the one that
      # ships.
      checks = forAllSystems vmTests;

      # An example Pi: flash it, boot, and it answers the LAN on port 53.
      # See docs/how-to/deploy-on-a-pi.md.
      nixosConfigurations.pi = nixpkgs.lib.nixosSystem {
        modules = [
          "${nixpkgs}/nixos/modules/installer/sd-card/sd-image-aarch64.nix"
          self.nixosModules.default
          ./nix/pi.nix
        ];
      };

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          packages = with pkgs; [
            go
            gopls
            knot-dns # kdig, with DoT/DoH
            dnsperf
            unbound
            dnsmasq
            openssl
            curl
            jq
            nixfmt
            nixos-rebuild
          ];
        };
      });
    };
}
