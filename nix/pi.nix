# The example Raspberry Pi (3/4/5, aarch64) behind nixosConfigurations.pi and
# packages.aarch64-linux.sd-image. The SD-card layout, boot loader and
# firmware come from nixpkgs' installer/sd-card/sd-image-aarch64.nix (imported
# in flake.nix). Adapt the marked lines to your network; see
# docs/how-to/deploy-on-a-pi.md.
{ lib, ... }:
{
  nixpkgs.hostPlatform = "aarch64-linux";
  system.stateVersion = "26.05";

  networking.hostName = "nxdns-pi";

  # The Pi itself keeps using the router (from DHCP) for its own lookups, not
  # nxdns: a Pi has no real-time clock, TLS to the upstreams needs the right
  # time, and NTP needs names resolved before it can set the time.
  networking.useDHCP = lib.mkDefault true;

  services.nxdns = {
    enable = true;
    # Port 53 (UDP and TCP) from the LAN; /metrics stays on 127.0.0.1:9153.
    openFirewall = true;
    settings = {
      # Priority failover: Quad9 first, Cloudflare when Quad9 is unusable.
      # `address` is required for a named host: nxdns never resolves it.
      upstreams = [
        {
          url = "tls://dns.quad9.net";
          address = "9.9.9.9";
          priority = 0;
        }
        {
          url = "https://cloudflare-dns.com/dns-query";
          address = "1.1.1.1";
          priority = 1;
        }
      ];
      # Local names and reverse lookups go to the router (adapt the address).
      forward_zones = [
        {
          zone = "lan";
          resolver = "udp://192.168.1.1:53";
        }
        {
          zone = "168.192.in-addr.arpa";
          resolver = "udp://192.168.1.1:53";
        }
      ];
    };
  };

  # Remote administration (`nixos-rebuild --target-host`): put your key here.
  services.openssh = {
    enable = true;
    settings.PasswordAuthentication = false;
  };
  users.users.root.openssh.authorizedKeys.keys = [
    # "ssh-ed25519 AAAA… you@laptop"
  ];

  # `nixos-rebuild switch --flake` on the Pi itself.
  nix.settings.experimental-features = [
    "nix-command"
    "flakes"
  ];
}
