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

      # Stamped into `nxdns version`: the version only (nix/common.nix says
      # why not the commit).
      stamp = { };

      vmTest = pkgs: file: pkgs.testers.runNixOSTest (import file { inherit self pkgs; });
      vmTests = pkgs: {
        burst = vmTest pkgs ./vmtests/burst.nix;
        saturated-primary = vmTest pkgs ./vmtests/saturated-primary.nix;
        fast-standby = vmTest pkgs ./vmtests/fast-standby.nix;
        reload = vmTest pkgs ./vmtests/reload.nix;
        clock-behind = vmTest pkgs ./vmtests/clock-behind.nix;
        dot-doh = vmTest pkgs ./vmtests/dot-doh.nix;
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

      # The scenarios of docs/design.md#scenarios (and the DoT/DoH serving of docs/design.md#tls-serving, dot-doh) as NixOS
      # VM tests. x86_64 only: they need KVM,
      # and under aarch64 emulation three VMs would miss the tests' timing
      # bounds for the emulator's sake. The Pi's binary is the same source,
      # built (and its Go tests run) by packages.aarch64-linux.nxdns.
      checks.x86_64-linux = vmTests nixpkgs.legacyPackages.x86_64-linux;

      # The appliance around the module: the boot path that needs no DNS to
      # set the clock, SSH with a key and an assertion refusing an image
      # without one, an image trimmed to a DNS server (nix/pi.nix). Import
      # it together with nixpkgs' installer/sd-card/sd-image-aarch64.nix
      # (Pi 3, Pi 4, Zero 2, CM4), as the `pi` template does.
      nixosModules.pi = {
        key = "nxdns#nixosModules.pi";
        _file = ./flake.nix;
        imports = [
          self.nixosModules.default
          ./nix/pi.nix
        ];
      };

      # A Pi of your own: `nix flake init -t github:nxdns/nxdns#pi`, put your
      # SSH key in configuration.nix, build (docs/how-to/deploy-on-a-pi.md).
      # A template rather than a nixosConfigurations output: that output
      # would need a key this repository cannot ship, and without one its
      # assertion would fail `nix flake check` on every fresh clone.
      templates.pi = {
        path = ./templates/pi;
        description = "A Raspberry Pi running nxdns (fill in your SSH key and router)";
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
            # nixos-rebuild's Python rewrite; in 26.05 it is the only one.
            nixos-rebuild-ng
          ];
        };
      });
    };
}
