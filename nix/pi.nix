# The Raspberry Pi appliance behind nixosModules.pi, which the flake's `pi`
# template (templates/pi) imports. The SD-card layout, boot loader and
# firmware come from nixpkgs' installer/sd-card/sd-image-aarch64.nix
# (imported in flake.nix), which boots the Pi 3, Pi 4, Zero 2 W and CM4 —
# not the Pi 5. For your network, set services.nxdns.pi.router and your SSH
# key (the template's configuration.nix), and override what you like; see docs/how-to/deploy-on-a-pi.md.
#
# The boot path (docs/how-to/deploy-on-a-pi.md, "The clock"): a Pi has no
# real-time clock, DoT/DoH need a correct clock to verify certificates, NTP
# needs names resolved. So nothing the Pi needs to set its clock goes through
# nxdns: the Pi's own resolver is the router, the time servers include IP
# addresses, and nxdns, which starts at once and never waits for the clock,
# reports an unsynchronized clock in its log and /api/health and probes its
# upstreams again as soon as timesyncd has set the time.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  router = config.services.nxdns.pi.router;
in
{
  options.services.nxdns.pi.router = lib.mkOption {
    type = lib.types.str;
    default = "192.168.1.1";
    example = "192.168.0.1";
    description = ''
      The router's address: the LAN's DHCP server, the Pi's own resolver (for
      NTP names, nix, ssh) and the resolver of the local zones.
    '';
  };

  # Everything below that a household changes is a default: a definition in
  # your own configuration replaces it (lists included) rather than adding
  # to it.
  config = {
    nixpkgs.hostPlatform = lib.mkDefault "aarch64-linux";
    system.stateVersion = lib.mkDefault "26.05";

    networking.hostName = lib.mkDefault "nxdns-pi";

    # An address from the router's DHCP (give the Pi a static lease there)...
    networking.useDHCP = lib.mkDefault true;
    # ...but not its DNS server: once the router hands out the Pi as the LAN's
    # DNS server, the Pi would ask itself, and at boot nxdns cannot verify a
    # certificate before NTP has set the clock, which needs DNS. The Pi's own
    # lookups (NTP pool, nix, ssh) go to the router, over plain DNS, which needs
    # no clock.
    networking.nameservers = lib.mkDefault [ router ];
    networking.dhcpcd.extraConfig = ''
      nohook resolv.conf
    '';

    # timesyncd saves the time at shutdown and on every sync
    # (/var/lib/systemd/timesync/clock) and starts from it, so after a power
    # cut the clock is behind by the time the Pi was off, not at 1970. The
    # names resolve through the router; the IP addresses (time.cloudflare.com,
    # anycast) need no DNS at all.
    networking.timeServers = lib.mkDefault [
      "0.nixos.pool.ntp.org"
      "1.nixos.pool.ntp.org"
      "162.159.200.1"
      "162.159.200.123"
    ];
    services.timesyncd.enable = true;

    services.nxdns = {
      enable = true;
      # Port 53 (UDP and TCP) from the LAN; /metrics stays on 127.0.0.1:9153.
      openFirewall = true;
      settings = {
        # Priority failover: Quad9 first, Cloudflare when Quad9 is unusable.
        # `address` is required for a named host: nxdns never resolves it.
        upstreams = lib.mkDefault [
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
        # Local names and reverse lookups go to the router.
        forward_zones = lib.mkDefault [
          {
            zone = "lan";
            resolver = "udp://${router}:53";
          }
          {
            zone = "168.192.in-addr.arpa";
            resolver = "udp://${router}:53";
          }
        ];
      };
    };

    # The way in: SSH with a key, nothing else (no password, no console user).
    # An image without a key could never be logged into, so it is refused.
    services.openssh = {
      enable = true;
      settings = {
        PasswordAuthentication = false;
        KbdInteractiveAuthentication = false;
        PermitRootLogin = "prohibit-password";
      };
    };
    assertions = [
      {
        assertion = lib.any (
          u: u.openssh.authorizedKeys.keys != [ ] || (u.openssh.authorizedKeys.keyFiles or [ ]) != [ ]
        ) (lib.attrValues config.users.users);
        message = ''
          The nxdns Pi image has no SSH key: password login is off and there is
          no console user, so nobody could log in. Put your public key in
          users.users.root.openssh.authorizedKeys.keys (configuration.nix of
          the `pi` template: docs/how-to/deploy-on-a-pi.md).
        '';
      }
    ];

    # A DNS appliance, not an installer: nixpkgs' SD image imports
    # profiles/base.nix (partitioning, recovery and file-system tools, ZFS and
    # other file systems); leave it out. nixos-rebuild stays, for
    # `nixos-rebuild switch --flake` on the Pi.
    disabledModules = [ "profiles/base.nix" ];
    boot.supportedFilesystems.zfs = lib.mkForce false;
    documentation.nixos.enable = false;
    environment.systemPackages = [ pkgs.knot-dns ]; # kdig, to test from the Pi itself

    nix.settings.experimental-features = [
      "nix-command"
      "flakes"
    ];
  };
}
