# A sample configuration for nixcheck (../shared/tools/nixcheck): it is
# evaluated together with module.nix against nixcheck's stub of NixOS and
# sets every typed key of services.nxdns.settings and every option of
# services.nxdns. Not used by the flake. Its rendered TOML is committed as
# vmtests/golden/full.toml (regenerate: vmtests/golden/regenerate.sh), and
# CI runs `nxdns check` on it.
{ pkgs, ... }:
{
  services.nxdns = {
    enable = true;
    # module.nix alone has no default package (nixpkgs has no pkgs.nxdns);
    # the flake's nixosModules.default sets this the same way.
    package = pkgs.callPackage ../nix/package.nix { };
    openFirewall = true;
    checkConfig = true;
    # Module options that change the unit (the golden test knows which keys):
    # the certificate's group and ordering, and the password credential.
    tls.acmeHost = "dns.home.example.org";
    web = {
      passwordFile = "/run/secrets/nxdns-web-password";
      openFirewall = true;
    };
    monitoring = {
      grafanaDashboard = true;
      prometheusRules = true;
      prometheusScrape = true;
    };
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
        cache_size = 20000;
        cache_min_ttl = 60;
        cache_max_ttl = 43200;
        stale_max_age = 3600;
        prefetch = false;
        cache_file = "/var/lib/nxdns/answers.cache";
        rebinding_protection = true;
        rebinding_allow = [ "plex.direct" ];
        rebinding_answer = "nxdomain";
        rate_limit_qps = 40;
        rate_limit_burst = 800;
        rate_limit_exempt = [
          "127.0.0.0/8"
          "::1/128"
          "192.168.1.1"
        ];
        trusted_forwarders = [ "192.168.1.1" ];
      };
      # Not the defaults: the unit must not change with them
      # (vmtests/golden/unit-*.json are compared).
      # Within the budget inequalities (docs/design.md#config-budgets), so `nxdns check` does not warn.
      upstream = {
        attempt_timeout_ms = 1500;
        total_timeout_ms = 3500;
        read_timeout_ms = 4000;
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
          # A file that exists where the golden file is checked (Debian CI,
          # NixOS); nixcheck's fake pkgs.cacert has no files.
          ca_file = "/etc/ssl/certs/ca-certificates.crt";
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
        {
          name = "tablet";
          mac = "02:00:5e:00:53:01";
          client_id = "kids-tablet";
        }
      ];
      devices = {
        neighbours = true;
        leases = [
          {
            format = "dnsmasq";
            path = "/var/lib/misc/dnsmasq.leases";
          }
        ];
        new_devices = "kids";
      };
      # Not loopback: nxdns demands the password (web.passwordFile above
      # sets password_file).
      web.listen = "0.0.0.0:9153";
      log = {
        level = "info";
        queries = true;
      };
      # cert_file and key_file come from tls.acmeHost.
      tls = {
        dot_listen = [
          "0.0.0.0:853"
          "[::]:853"
        ];
        doh_listen = [ "192.168.1.2:443" ];
        doh3_listen = [ "192.168.1.2:443" ];
      };
      local = {
        records = [
          "nas.home.arpa. 300 IN A 192.168.1.50"
          "printer.home.arpa. CNAME nas.home.arpa."
        ];
        forward_private = false;
        bypass_guards = true;
      };
      filter = {
        lists = [
          {
            name = "ads";
            url = "https://lists.example.org/ads.txt";
          }
          {
            name = "family";
            url = "https://lists.example.org/family.txt";
            kind = "block";
          }
          {
            name = "work-allow";
            # A file the check can see (CI, NixOS); nxdns check reads no list.
            path = "/etc/hosts";
            kind = "allow";
          }
        ];
        groups = [
          {
            name = "default";
            lists = [
              "ads"
              "work-allow"
            ];
          }
          {
            name = "kids";
            clients = [
              "laptop"
              "192.168.1.64/26"
            ];
            lists = [
              "ads"
              "family"
            ];
            # the disabled upstream above, with its address and ca_file
            upstreams = [ "tls://resolver.home.arpa:8853" ];
            schedule = [
              {
                days = [
                  "mon"
                  "tue"
                  "wed"
                  "thu"
                  "fri"
                ];
                from = "20:00";
                to = "07:00";
              }
              {
                from = "00:00";
                to = "24:00";
              }
            ];
            services = [
              "tiktok"
              "youtube"
            ];
            safe_search = [
              "google"
              "bing"
              "duckduckgo"
              "youtube"
            ];
            youtube_mode = "moderate";
          }
        ];
        block = [ "||tracker.example.com^" ];
        allow = [ "cdn.example.com" ];
        block_response = "nxdomain";
        block_ttl = 300;
        refresh_hours = 12;
        state_dir = "/var/lib/nxdns/lists";
      };
      history = {
        path = "/var/lib/nxdns/queries.db";
        max_bytes = 67108864;
        max_days = 14;
        flush_seconds = 120;
      };
    };
  };
}
