# Your Raspberry Pi running nxdns (docs/how-to/deploy-on-a-pi.md).
# Created by `nix flake init -t github:nxdns/nxdns#pi`; edit configuration.nix
# (your SSH key, your router), then
#   nix build .#nixosConfigurations.pi.config.system.build.sdImage
{
  description = "A Raspberry Pi (3, 4, Zero 2 W, CM4) answering the LAN's DNS with nxdns";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";
  # nxdns brings its own nixpkgs pin for its package (the Go it was tested
  # with); no `follows` unless your nixpkgs has Go >= 1.26.
  inputs.nxdns.url = "github:nxdns/nxdns";

  outputs =
    { self, nixpkgs, nxdns }:
    {
      nixosConfigurations.pi = nixpkgs.lib.nixosSystem {
        modules = [
          "${nixpkgs}/nixos/modules/installer/sd-card/sd-image-aarch64.nix"
          # services.nxdns with nxdns's own package, and the appliance: the
          # boot path that needs no DNS to set the clock, SSH with a key only
          # (an image without a key is refused), a trimmed image.
          nxdns.nixosModules.pi
          ./configuration.nix
        ];
      };
      # `nix build .#sd-image` on an aarch64 machine (or an x86_64 one with
      # an aarch64 remote builder or binfmt emulation).
      packages.aarch64-linux.sd-image = self.nixosConfigurations.pi.config.system.build.sdImage;
    };
}
