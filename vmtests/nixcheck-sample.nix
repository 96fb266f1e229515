# A sample configuration for nixcheck (../shared/tools/nixcheck): it is
# evaluated together with module.nix against nixcheck's stub of NixOS and
# exercises every typed key of services.nxdns.settings. Not used by the flake.
{ pkgs, ... }:
{
  services.nxdns = {
    enable = true;
    # module.nix alone has no default package (nixpkgs has no pkgs.nxdns);
    # the flake's nixosModules.default sets this the same way.
    package = pkgs.callPackage ../nix/package.nix { commit = "nixcheck"; };
    openFirewall = true;
    settings = {
      dns = {
        listen = [
          "0.0.0.0:53"
          "[::]:53"
          "127.0.0.1:5353"
        ];
        allow = [
          "127.0.0.0/8"
          "::1/128"
          "192.168.0.0/16"
          "fd00::/8"
        ];
      };
      upstream = {
        attempt_timeout_ms = 2000;
        total_timeout_ms = 4000;
        read_timeout_ms = 3000;
      };
      upstreams = [
        {
          url = "tls://dns.quad9.net";
          address = "9.9.9.9";
          priority = 0;
        }
        {
          url = "https://cloudflare-dns.com/dns-query";
          address = "1.1.1.1";
          tls_name = "cloudflare-dns.com";
          priority = 1;
        }
        {
          url = "tls://resolver.home.arpa:8853";
          address = "192.168.1.10";
          ca_file = "${pkgs.cacert}/etc/ssl/certs/ca-bundle.crt";
          enabled = false;
        }
      ];
      forward_zones = [
        {
          zone = "lan";
          resolver = "udp://192.168.1.1:53";
        }
        {
          zone = "168.192.in-addr.arpa";
          resolver = "tcp://192.168.1.1:53";
        }
      ];
      clients = [
        {
          ip = "192.168.1.20";
          name = "laptop";
        }
      ];
      web.listen = "127.0.0.1:9153";
      log = {
        level = "info";
        queries = true;
      };
    };
  };
}
