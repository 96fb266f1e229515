# NixOS module for nxdns: services.nxdns.{enable,package,settings,openFirewall,
# checkConfig,monitoring,tls.acmeHost,web.passwordFile,web.openFirewall}.
#
# Modelled on nixpkgs' blocky, adguardhome, routedns (settings rendered with
# pkgs.formats) and unbound (config in /etc, reload by SIGHUP, hardening);
# Type=notify with an ExecReload that waits for the reload's outcome
# (`nxdns reload`), so a rejected reload fails. `package` has no default here
# because nixpkgs has no `pkgs.nxdns`: the flake's nixosModules.default
# imports this file and sets it to the flake's own build.
{
  config,
  lib,
  pkgs,
  utils,
  ...
}:
let
  inherit (lib) mkOption types literalExpression;

  cfg = config.services.nxdns;
  format = pkgs.formats.toml { };

  # "host:port" as Go's net.SplitHostPort takes it: an IPv6 host in brackets,
  # an empty host for every address, a port without leading zeros. ("[[]"
  # and "[]]" are literal brackets: Nix's regex engine rejects "\\[".)
  hostPortRegex = "([[][0-9A-Za-z:.%_-]+[]]|[0-9A-Za-z._-]*):(0|[1-9][0-9]{0,4})";
  hostPort = types.strMatching "^${hostPortRegex}$" // {
    description = "\"host:port\" (IPv6 host in brackets)";
  };
  hostPortOrEmpty = types.strMatching "^(${hostPortRegex})?$" // {
    description = "\"host:port\" or \"\" (disabled)";
  };
  # nxdns rejects a relative path (a service's working directory is nobody's
  # choice). A string, not types.path: a Nix path literal would copy a state
  # file, a key or a password hash into the world-readable store.
  absolutePath = types.strMatching "^/.*" // {
    description = "absolute path (a string)";
  };

  # The service's state directory (StateDirectory=nxdns below): the default
  # home of the cache file, the downloaded lists and the history store.
  stateDir = "/var/lib/nxdns";
  listsDir = "${stateDir}/lists";

  # dns.allow is left to the binary (null: not written, so the default of docs/design.md#config-allow
  # applies); this is how the option's description names that default.
  allowDefaultText = ''`[ "local" ]`: loopback and every network this host is attached to (IPv4 and IPv6), followed as interfaces change'';

  # The hash of web.passwordFile reaches nxdns as a systemd credential: copied
  # by systemd at start into this path, readable by the dynamic user only.
  passwordCredential = "/run/credentials/nxdns.service/web-password";

  # A typed option whose unset value (null) is left out of the file, so
  # nxdns's own default applies (docs/reference/configuration.md is the one table of defaults).
  optional =
    type: description:
    mkOption {
      type = types.nullOr type;
      default = null;
      inherit description;
    };

  # Nested sections are typed submodules WITHOUT a freeformType: the
  # top-level settings are freeform (a section this module does not know yet
  # still reaches nxdns), but inside a known section a misspelt key —
  # `settings.dns.lisen`, `upstreams = [ { tls_nmae = …; } ]` — is an
  # evaluation error naming the option, as nxdns itself rejects unknown keys.
  # (A freeform submodule would let the typo through to `nxdns check`, which
  # fails the build later and with less context.)
  dnsSection = {
    options = {
      listen = mkOption {
        type = types.listOf hostPort;
        default = [
          "0.0.0.0:53"
          "[::]:53"
        ];
        description = ''
          Addresses nxdns answers on; each gets a UDP and a TCP listener.
          The module listens on port 53 on every address (the binary's own
          default is loopback port 5300).
        '';
      };
      allow = optional (types.listOf types.str) ''
        Client prefixes (CIDR), or `"local"`, that are answered; others get
        REFUSED. `null` keeps nxdns's default, ${allowDefaultText}.
      '';
      cache_size = optional (types.ints.between 0 1000000) "Answers the cache holds; 0 turns it off (default 10000).";
      cache_max_bytes = optional (types.ints.between 1048576 68719476736) "Memory the cached answers may hold, in bytes; an answer over 1/64 of it is not cached (default 33554432, 32 MiB).";
      cache_min_ttl = optional (types.ints.between 0 3600) "Shorter TTLs are cached this long, in seconds (default 0).";
      cache_max_ttl = optional (types.ints.between 1 604800) "Longer TTLs are cached only this long, in seconds (default 86400).";
      stale_max_age = optional (types.ints.between 0 604800) "How long past expiry an answer may be served stale, in seconds; 0 turns serve-stale off (default 86400).";
      prefetch = optional types.bool "Refresh a name asked again in the last tenth of its TTL in the background (default true).";
      rebinding_protection = optional types.bool "Refuse an upstream answer that points a name at a private, loopback, link-local, unspecified or shared (100.64/10) address, with EDE 15 (default true).";
      rebinding_allow = optional (types.listOf types.str) "Names (each with every name below it) whose internal answers pass rebinding protection.";
      rebinding_answer = optional (types.enum [
        "servfail"
        "nxdomain"
      ]) "What a refused rebinding answer becomes: `servfail` (the default) or `nxdomain`.";
      rate_limit_qps = optional (types.ints.between 0 1000000) "Per-device rate limit: queries a second each device (an IPv4 address or IPv6 /64) refills; past it REFUSED with EDE 18; 0 turns it off (default 50).";
      rate_limit_burst = optional (types.ints.between 1 1000000) "Queries a device may send at once before the rate applies, at least rate_limit_qps (default 1000).";
      rate_limit_exempt = optional (types.listOf types.str) "IPs or CIDR prefixes never rate limited, such as a router forwarding the whole LAN; replaces the default (loopback).";
      trusted_forwarders = optional (types.listOf types.str) "Forwarders (IPs or CIDR prefixes) whose EDNS0 client MAC (option 65001) and client subnet name the device behind each query (docs/devices.md).";
      cache_file = mkOption {
        type = types.nullOr absolutePath;
        default = "${stateDir}/cache";
        description = ''
          Where the cache is saved (on shutdown and every few minutes while it
          changes) and loaded from at start, so a restart or a reboot starts
          warm. The module puts it in the state directory; `null` keeps the
          cache in memory only (nxdns's own default).
        '';
      };
    };
  };

  budgetMs = types.ints.between 100 120000;
  upstreamSection = {
    options = {
      attempt_timeout_ms = optional budgetMs "One attempt against one upstream, connect included (default 2000; at most half of total_timeout_ms, or `nxdns check` warns).";
      total_timeout_ms = optional budgetMs "Per-query budget of the upstream pool: every wait and attempt together (default 4000; above 4500 `nxdns check` warns: clients give up at 5 s).";
      read_timeout_ms = optional budgetMs "Whole forward-zone exchange: UDP, TC=1 fallback and TCP retry together (default 3000).";
    };
  };

  upstreamEntry = {
    options = {
      url = mkOption {
        type = types.strMatching "^(tls|https|quic|h3)://.+";
        example = "tls://dns.quad9.net";
        description = "`tls://host[:port]` (DoT, port 853), `https://host[:port]/path` (DoH, port 443), `quic://host[:port]` (DoQ, UDP 853) or `h3://host[:port]/path` (DoH over HTTP/3, UDP 443).";
      };
      address = optional types.str ''
        IP address to connect to. Required when the URL's host is a name:
        nxdns never resolves its upstreams' names.
      '';
      tls_name = optional types.str "Name the certificate must carry (default: the URL's host).";
      ca_file = optional types.path ''
        PEM file of extra trust on top of the system roots, for a private
        resolver. A path outside the Nix store is not visible to the build-time
        check: set `checkConfig = false` then.
      '';
      priority = optional types.int "Lower is tried first; equal priorities keep list order (default 0).";
      enabled = optional types.bool "Disabled upstreams are validated but never used (default true).";
    };
  };

  forwardZone = {
    options = {
      zone = mkOption {
        type = types.str;
        example = "lan";
        description = "Names at or below this domain go to `resolver`.";
      };
      resolver = mkOption {
        type = types.strMatching "^((udp|tcp)://.+:[0-9]+|(tls|https|quic|h3)://.+)$";
        example = "udp://192.168.1.1:53";
        description = "The zone's resolver: `udp://IP:port` or `tcp://IP:port`, or encrypted `tls://IP[:port]`, `https://IP[:port]/path`, `quic://IP[:port]` or `h3://IP[:port]/path` (docs/forward.md).";
      };
      validate = optional types.bool "DNSSEC-validate this zone's answers as `dnssec.mode` says (default false: a router's local zone is unsigned).";
      tls_name = optional types.str "An encrypted resolver: the name its certificate must carry (default: the URL's IP).";
      ca_file = optional types.path ''
        An encrypted resolver: PEM file of extra trust on top of the system
        roots. A path outside the Nix store is not visible to the build-time
        check: set `checkConfig = false` then.
      '';
    };
  };

  staticClient = {
    options = {
      ip = optional types.str "Client IP address; one of ip, mac, client_id is needed.";
      name = mkOption {
        type = types.str;
        description = "Name shown for this client in logs and metrics; not a filter group's name.";
      };
      mac = optional (types.strMatching "^[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}$") "The device's MAC address (docs/devices.md): named at whatever address the neighbour table or a trusted forwarder shows it.";
      client_id = optional (types.strMatching "^[0-9A-Za-z]([0-9A-Za-z-]{0,61}[0-9A-Za-z])?$") "The ClientID a DoT (SNI `ID.<served name>`) or DoH (`/dns-query/ID`) client presents.";
    };
  };

  leaseFile = {
    options = {
      format = mkOption {
        type = types.enum [
          "dnsmasq"
          "isc"
          "kea"
          "odhcpd"
        ];
        description = "The DHCP server that writes the file.";
      };
      path = mkOption {
        type = absolutePath;
        example = "/var/lib/misc/dnsmasq.leases";
        description = "The lease file; read as a regular file of at most 8 MiB, again within 10 s of a change.";
      };
    };
  };

  devicesSection = {
    options = {
      neighbours = optional types.bool "Read the kernel's neighbour table (ARP and NDP) for the clients' MAC addresses (default true).";
      leases = list leaseFile "DHCP lease files whose host names name devices.";
      new_devices = optional types.str "The filter group a device seen for the first time is filtered by until acknowledged on the dashboard (default: the `default` group).";
    };
  };

  webSection = {
    options = {
      listen = optional hostPortOrEmpty ''
        Address of /metrics, /api and the dashboard; "" disables them. nxdns's
        default is 127.0.0.1:9153. A non-loopback address needs a password
        (`services.nxdns.web.passwordFile`). `openFirewall` does not open it;
        `services.nxdns.web.openFirewall` does.
      '';
      password_file = optional absolutePath ''
        File holding the password hash (`nxdns hash-password`) that guards the
        dashboard and `/api/` (all but `/api/health`; `/metrics` stays open).
        Set by `services.nxdns.web.passwordFile`, which hands the file to
        nxdns as a systemd credential; set it here only for a file nxdns's
        dynamic user can read, never one in the Nix store.
      '';
      tls_listen = optional hostPortOrEmpty ''
        HTTPS address of the same endpoint, served with the `tls` certificate
        (`tls.cert_file`, `tls.key_file`); unset serves plain HTTP only. A
        non-loopback address needs a password. `openFirewall` does not open
        it.
      '';
      hostnames = optional (types.listOf types.str) ''
        Names besides the listen addresses and `localhost` that a request's
        Host header may carry (nxdns refuses others with 421: the guard
        against DNS rebinding). List the names the dashboard is opened by.
      '';
      tokens_over_http = optional types.bool ''
        Accept API tokens (`nxdns token add`) over plain HTTP from other
        hosts; by default only over `tls_listen` or from loopback.
      '';
    };
  };

  logSection = {
    options = {
      level = optional (types.enum [
        "debug"
        "info"
        "warn"
        "error"
      ]) "Log level (default info).";
      queries = optional types.bool "One structured journal line per query (default true).";
    };
  };

  tlsSection = {
    options = {
      cert_file = optional absolutePath ''
        PEM chain, leaf first (an ACME fullchain.pem). Set by `tls.acmeHost`.
        Read when nxdns starts and whenever it changes, not at build time.
      '';
      key_file = optional absolutePath "PEM key of `cert_file`. Set by `tls.acmeHost`.";
      dot_listen = optional (types.listOf hostPort) ''
        DNS over TLS listeners (RFC 7858), e.g. `[ "0.0.0.0:853" "[::]:853" ]`.
        `openFirewall` opens their ports (TCP).
      '';
      doh_listen = optional (types.listOf hostPort) ''
        DNS over HTTPS listeners (RFC 8484, path /dns-query), e.g.
        `[ "0.0.0.0:443" "[::]:443" ]`. `openFirewall` opens their ports (TCP).
      '';
      doq_listen = optional (types.listOf hostPort) ''
        DNS over QUIC listeners (RFC 9250), e.g. `[ "0.0.0.0:853" "[::]:853" ]`,
        behind the same certificate. `openFirewall` opens their ports (UDP).
      '';
      doh3_listen = optional (types.listOf hostPort) ''
        DNS over HTTPS over HTTP/3 listeners, e.g. `[ "0.0.0.0:443" "[::]:443" ]`,
        behind the same certificate; DoH answers then advertise them (Alt-Svc).
        `openFirewall` opens their ports (UDP).
      '';
    };
  };

  localSection = {
    options = {
      records = optional (types.listOf types.str) ''
        Local records in zone-file syntax, one per string, answered
        authoritatively, e.g. `"nas.home.arpa. 300 IN A 192.168.1.50"`
        (PTR records are derived for A/AAAA; TTL 300 when none is given).
      '';
      forward_private = optional types.bool ''
        Forward private reverse zones, single-label names and the
        special-use names (`local`, `home.arpa`, …) to the upstreams
        anyway, for networks that really route them (default false).
      '';
      bypass_guards = optional types.bool ''
        Answer `use-application-dns.net` (NXDOMAIN, so Firefox keeps this
        resolver) and `resolver.arpa` locally (default true).
      '';
    };
  };

  filterList = {
    options = {
      name = mkOption {
        type = types.strMatching "^[A-Za-z0-9._-]{1,64}$";
        example = "hagezi-pro";
        description = "The list's name: the metrics label, and what `groups` refer to.";
      };
      url = optional (types.strMatching "^https?://.+") ''
        Where the list is downloaded from (http or https), at start after its
        last good copy in `state_dir` loads, and every `refresh_hours`.
      '';
      path = optional types.path "A local list file instead of `url` (a Nix path is copied to the store).";
      kind = optional (types.enum [
        "block"
        "allow"
      ]) "`block` (default) or `allow`: an allowlist wins over every block rule.";
    };
  };

  filterWindow = {
    options = {
      days = optional (types.listOf (
        types.enum [
          "mon"
          "tue"
          "wed"
          "thu"
          "fri"
          "sat"
          "sun"
        ]
      )) "Days the window applies on (default every day).";
      from = mkOption {
        type = types.strMatching "^([01][0-9]|2[0-3]):[0-5][0-9]$";
        example = "22:00";
        description = "Start, HH:MM in the host's local time.";
      };
      to = mkOption {
        type = types.strMatching "^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$";
        example = "06:00";
        description = "End, HH:MM (24:00 is the end of the day); before `from` runs past midnight.";
      };
    };
  };

  filterGroup = {
    options = {
      name = mkOption {
        type = types.str;
        example = "kids";
        description = "The group's name; clients in no group get the group `default` (or every list, if there is none).";
      };
      clients = optional (types.listOf types.str) "Members: IP addresses, CIDR prefixes or `clients` names.";
      lists = optional (types.listOf types.str) "Names of the `lists` that apply to the group.";
      schedule = list filterWindow "When the group's lists apply (default always).";
      upstreams = optional (types.listOf types.str) "The group's own upstream pool (tls:// or https:// URLs; one that is an `upstreams` entry's url takes its address, tls_name and ca_file). Default: the main pool.";
      services = optional (types.listOf (types.strMatching "^[a-z0-9-]+$")) "Catalogue services blocked for the group while it applies (ids of `GET /api/filter/services`; the build-time check names a misspelt one).";
      safe_search = optional (types.listOf (types.enum [
        "google"
        "bing"
        "duckduckgo"
        "youtube"
      ])) "Search engines answered as a CNAME to their safe-search endpoint for the group while it applies.";
      youtube_mode = optional (types.enum [
        "strict"
        "moderate"
      ]) "YouTube's restricted mode when `safe_search` has youtube (default strict).";
    };
  };

  filterSection = {
    options = {
      lists = list filterList "Block- and allowlists (hosts, plain domains, adblock syntax, wildcards, regexes; at most 63).";
      groups = list filterGroup "Client groups and the lists each gets.";
      block = optional (types.listOf types.str) "Inline block rules, in any list line format.";
      allow = optional (types.listOf types.str) "Inline allow rules; they win over every block rule.";
      block_response = optional (types.enum [
        "null"
        "nxdomain"
        "refused"
      ]) "What a blocked name gets: `null` (0.0.0.0 / ::, NODATA for other types; the default), `nxdomain` or `refused`.";
      block_ttl = optional (types.ints.between 0 86400) "TTL of blocked answers, in seconds (default 60).";
      refresh_hours = optional (types.ints.between 1 720) "How often downloaded lists are fetched again (default 24, with jitter).";
      max_names_per_list = optional (types.ints.between 1 50000000) "Names one list may load; later ones are left out and counted (default 1000000).";
      max_names = optional (types.ints.between 1 50000000) "Names all lists together may load (default 2000000).";
      state_dir = mkOption {
        type = types.nullOr absolutePath;
        default = listsDir;
        description = ''
          Where each downloaded list's last good copy and its ETag are kept,
          loaded at start before any download (a Pi that boots offline still
          filters). The module's default is in the state directory, which
          systemd creates; a list with a `url` needs it.
        '';
      };
    };
  };

  historySection = {
    options = {
      path = mkOption {
        type = types.nullOr absolutePath;
        default = "${stateDir}/history.db";
        description = ''
          The query history store, for the dashboard and the API. The module
          puts it in the state directory; `null` keeps the history in memory
          only (nxdns's own default), lost on restart.
        '';
      };
      max_bytes = optional (types.ints.between 1048576 68719476736) "The store never grows past this many bytes; oldest rows go first (default 268435456, 256 MiB). With path = null it is resident memory: 64 MiB suits a Pi with 512 MB.";
      max_days = optional (types.ints.between 1 366) "Rows older than this many days are deleted (default 30).";
      flush_seconds = optional (types.ints.between 1 3600) "Events are written in one transaction per interval; a power cut loses at most one (default 60).";
    };
  };

  dnssecSection = {
    options = {
      mode = optional (types.enum [
        "off"
        "shadow"
        "enforce"
      ]) "off, shadow (validate, log and count bogus answers, answer as before) or enforce (bogus answers become SERVFAIL once the clock is set); default shadow (docs/dnssec.md).";
      trust_anchors_file = optional absolutePath "DS or DNSKEY records in zone-file syntax that replace the built-in root anchors (default: the root's KSK-2017 and KSK-2024).";
      negative_trust_anchors = optional (types.listOf types.str) "Names not validated, with everything below them (RFC 7646).";
      clock_skew = optional (types.ints.between 0 86400) "Seconds the clock may be off either side of a signature's validity period (default 3600).";
    };
  };

  peerEntry = {
    options = {
      url = mkOption {
        type = types.str;
        description = "The peer's web endpoint, http://IP:PORT or https://HOST:PORT.";
      };
      token_file = mkOption {
        type = absolutePath;
        description = "A file holding an API token of the peer's (nxdns token add NAME --scope read, on the peer); never one in the Nix store.";
      };
    };
  };

  mqttSection = {
    options = {
      broker = optional types.str "The MQTT broker for Home Assistant, mqtt://IP:PORT or mqtts://IP:PORT (docs/how-to/home-assistant.md); unset leaves MQTT off. An IP address, never a name.";
      username = optional types.str "The broker login's user name.";
      password_file = optional absolutePath "File whose first line is the broker password; hand it over with LoadCredential, never from the Nix store.";
      tls_name = optional types.str "With mqtts: the name the broker's certificate must carry (default: its IP address).";
      ca_file = optional absolutePath "With mqtts: extra PEM roots to trust.";
      prefix = optional types.str "Start of nxdns's own topics and the device id (default nxdns); two nxdns on one broker need two.";
      discovery_prefix = optional types.str "Home Assistant's discovery prefix (default homeassistant).";
      pause_minutes = optional (types.ints.between 1 10080) "How long a group's switch turned off pauses its filtering; nxdns ends the pause itself (default 60).";
      publish_seconds = optional (types.ints.between 5 3600) "How often the sensors are published (default 30).";
    };
  };

  section =
    module: description:
    mkOption {
      type = types.submodule module;
      default = { };
      inherit description;
    };
  list =
    module: description:
    mkOption {
      type = types.nullOr (types.listOf (types.submodule module));
      default = null;
      inherit description;
    };

  # nxdns's built-in pair (internal/config.Default). The binary uses it only
  # when it runs without a file; a file must name its upstreams, so the
  # module writes them out: `enable = true;` alone is a working resolver.
  # nix/settings_test.go checks this list against the binary's.
  builtinUpstreams = [
    {
      url = "tls://dns.quad9.net";
      address = "9.9.9.9";
      priority = 0;
    }
    {
      url = "tls://one.one.one.one";
      address = "1.1.1.1";
      priority = 1;
    }
  ];

  # Every key of nxdns's configuration model has a typed option here
  # (nix/settings_test.go compares the two, and fails when the model gains a
  # key this module lacks). Keep the shape the test reads: one
  # `NAME = section|list VARIABLE "…";` line per section, and each section
  # variable an attribute set `{ options = { key = …; }; }`.
  settingsModule = {
    freeformType = format.type;
    options = {
      dns = section dnsSection "Listeners, access control and the answer cache.";
      upstream = section upstreamSection "Time budgets shared by all upstreams.";
      upstreams = list upstreamEntry ''
        Encrypted upstream resolvers, tried by priority. The default is
        nxdns's built-in pair (Quad9 and Cloudflare over DoT, by address),
        written into the file because nxdns uses its built-in upstreams
        only when it runs without one.
      '' // {
        type = types.listOf (types.submodule upstreamEntry);
        default = builtinUpstreams;
        defaultText = literalExpression ''
          [
            { url = "tls://dns.quad9.net"; address = "9.9.9.9"; priority = 0; }
            { url = "tls://one.one.one.one"; address = "1.1.1.1"; priority = 1; }
          ]
        '';
      };
      forward_zones = list forwardZone "Conditional forwarding of local zones to the LAN's resolver.";
      clients = list staticClient "Static client names for logs and metrics.";
      web = section webSection "The metrics, API and dashboard endpoint.";
      log = section logSection "Logging to the journal.";
      tls = section tlsSection "DoT and DoH served to the LAN (docs/how-to/serve-dot-doh.md).";
      local = section localSection "Local records and the names nxdns answers itself.";
      filter = section filterSection "Blocklists, allowlists and client groups.";
      history = section historySection "The query history kept for the dashboard and the API.";
      dnssec = section dnssecSection "DNSSEC validation of the upstreams' answers (docs/dnssec.md).";
      devices = section devicesSection "Devices by MAC address, names from DHCP lease files, new devices (docs/devices.md).";
      mqtt = section mqttSection "Home Assistant over MQTT discovery (docs/how-to/home-assistant.md).";
      peers = list peerEntry "Other nxdns whose dashboard state (allowed names, pauses) this one keeps in agreement with (docs/how-to/two-pis.md).";
    };
  };

  acmeHost = cfg.tls.acmeHost;
  # security.acme.certs.<acmeHost>, and its directory and group as NixOS's
  # acme module declares them (directory is read-only /var/lib/acme/<name>,
  # group defaults to "acme"; the `or` only serves evaluations without it).
  acmeCert = config.security.acme.certs.${acmeHost} or { };
  acmeDir = acmeCert.directory or "/var/lib/acme/${acmeHost}";

  # TOML has no null. lib.filterAttrsRecursive does not descend into lists,
  # and upstreams / forward_zones are lists of tables, so strip by hand; a
  # section left empty (`log = { }` when no log option is set) is dropped too.
  # Derivations (e.g. a ca_file given as a package) are left whole.
  stripNulls =
    v:
    if lib.isDerivation v then
      v
    else if lib.isAttrs v then
      lib.filterAttrs (_: x: x != null && x != { }) (lib.mapAttrs (_: stripNulls) v)
    else if lib.isList v then
      map stripNulls v
    else
      v;

  configFile = format.generate "nxdns.toml" (stripNulls cfg.settings);
  configPath = "/etc/nxdns/nxdns.toml";

  # Ports to open: those of non-loopback listen addresses.
  splitListen =
    addr:
    let
      m = builtins.match "^${hostPortRegex}$" addr;
    in
    {
      host = lib.removeSuffix "]" (lib.removePrefix "[" (builtins.elemAt m 0));
      port = lib.toInt (builtins.elemAt m 1);
    };
  # Where a Prometheus on this host reaches /metrics: web.listen, with a
  # wildcard host replaced by loopback.
  webListen = if cfg.settings.web.listen == null then "127.0.0.1:9153" else cfg.settings.web.listen;
  scrapeTarget =
    let
      s = splitListen webListen;
      host =
        if lib.elem s.host [
          ""
          "0.0.0.0"
        ] then
          "127.0.0.1"
        else if s.host == "::" then
          "[::1]"
        else if lib.hasInfix ":" s.host then
          "[${s.host}]"
        else
          s.host;
    in
    "${host}:${toString s.port}";

  isLoopback = host: lib.hasPrefix "127." host || host == "::1" || host == "localhost";
  # The ports of the non-loopback addresses among addrs.
  openPorts =
    addrs: lib.unique (map (a: a.port) (lib.filter (a: !isLoopback a.host) (map splitListen addrs)));
  publicPorts = openPorts cfg.settings.dns.listen;
  # DoT and DoH are TCP only.
  tlsPorts = openPorts (
    lib.defaultTo [ ] cfg.settings.tls.dot_listen ++ lib.defaultTo [ ] cfg.settings.tls.doh_listen
  );
  # DoQ and DoH over HTTP/3 are UDP only.
  doqPorts = openPorts (
    lib.defaultTo [ ] cfg.settings.tls.doq_listen ++ lib.defaultTo [ ] cfg.settings.tls.doh3_listen
  );
  webPorts = openPorts (lib.optional (webListen != "") webListen);
  listensOnWildcard53 = lib.any (
    a:
    let
      s = splitListen a;
    in
    s.port == 53 && lib.elem s.host [
      ""
      "0.0.0.0"
      "::"
    ]
  ) cfg.settings.dns.listen;
in
{
  options.services.nxdns = {
    enable = lib.mkEnableOption "nxdns, a DNS forwarder with encrypted upstreams and priority failover";

    package = mkOption {
      type = types.package;
      example = literalExpression "inputs.nxdns.packages.\${pkgs.stdenv.hostPlatform.system}.nxdns";
      description = ''
        The nxdns package. The flake's `nixosModules.default` sets it to the
        flake's own build; importing `module.nix` directly requires setting it.
      '';
    };

    settings = mkOption {
      type = types.submodule settingsModule;
      default = { };
      example = literalExpression ''
        {
          upstreams = [
            { url = "tls://dns.quad9.net"; address = "9.9.9.9"; }
            { url = "https://cloudflare-dns.com/dns-query"; address = "1.1.1.1"; priority = 1; }
          ];
          forward_zones = [ { zone = "lan"; resolver = "udp://192.168.1.1:53"; } ];
        }
      '';
      description = ''
        nxdns configuration, written as TOML to /etc/nxdns/nxdns.toml (see
        docs/reference/configuration.md for every key). Options left `null` are omitted and
        take nxdns's defaults. Changing settings reloads nxdns (SIGHUP)
        instead of restarting it; an invalid file is rejected at build time
        by `nxdns check`.
      '';
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Open the DNS ports of `settings.dns.listen` (TCP and UDP) and of
        `settings.tls.dot_listen` and `doh_listen` (TCP) and `doq_listen`
        and `doh3_listen` (UDP) in the firewall,
        loopback addresses excluded. The web endpoint is not opened (see
        `web.openFirewall`).
      '';
    };

    tls.acmeHost = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "dns.home.example.org";
      description = ''
        Serve DoT/DoH with the certificate of `security.acme.certs.<name>`
        (declare it there, e.g. with a DNS-01 `dnsProvider`): sets
        `settings.tls.cert_file`/`key_file` to its fullchain.pem and key.pem,
        gives nxdns the certificate's group, starts nxdns after the
        certificate's `acme-<name>.service` (which puts a self-signed
        placeholder in place until the first issuance) and reloads nxdns
        (SIGHUP) after each renewal (`reloadServices`). The listeners are
        `settings.tls.dot_listen` and `doh_listen`.
      '';
    };

    web = {
      passwordFile = mkOption {
        type = types.nullOr absolutePath;
        default = null;
        example = "/run/secrets/nxdns-web-password";
        description = ''
          File holding the dashboard's password hash (`nxdns hash-password`),
          outside the Nix store (agenix, sops-nix, or a file you put there).
          systemd hands it to nxdns as a credential (LoadCredential, read as
          root at start, visible to nxdns alone), and the module points
          `settings.web.password_file` at it, so the hash never reaches the
          store. A new hash takes effect on restart
          (`systemctl restart nxdns`), not on reload.
        '';
      };
      openFirewall = mkOption {
        type = types.bool;
        default = false;
        description = ''
          Open the port of `settings.web.listen` (TCP) in the firewall, when
          it is not a loopback address: the dashboard and the API (behind the
          password) and `/metrics` (open) for the LAN.
        '';
      };
    };

    monitoring = {
      grafanaDashboard = mkOption {
        type = types.bool;
        default = false;
        description = ''
          Provision nxdns's Grafana dashboard (contrib/grafana/nxdns.json)
          into this host's Grafana (`services.grafana.provision`). The
          dashboard asks for its Prometheus data source when opened.
        '';
      };
      prometheusRules = mkOption {
        type = types.bool;
        default = false;
        description = ''
          Add nxdns's alert rules (contrib/prometheus/nxdns-rules.yml) to this
          host's Prometheus (`services.prometheus.ruleFiles`).
        '';
      };
      prometheusScrape = mkOption {
        type = types.bool;
        default = false;
        description = ''
          Add a scrape job `nxdns` for this host's nxdns (`settings.web.listen`)
          to this host's Prometheus.
        '';
      };
    };

    checkConfig = mkOption {
      type = types.bool;
      default = true;
      description = ''
        Validate the generated file with `nxdns check` when the system is
        built. Skipped automatically when the build machine cannot run the
        target's binary (a cross-built Pi image). Turn off if a `ca_file`
        lives outside the Nix store, where the build sandbox cannot read it.
      '';
    };
  };

  config = lib.mkMerge [
    (lib.mkIf cfg.enable {
      assertions = [
        {
          assertion = cfg.settings.dns.listen != [ ];
          message = "services.nxdns.settings.dns.listen is empty: nxdns would answer nobody.";
        }
        {
          assertion = cfg.settings.upstreams != [ ];
          message = "services.nxdns.settings.upstreams is empty: nxdns needs at least one upstream (leave the option unset for the built-in pair).";
        }
        {
          assertion = cfg.monitoring.prometheusScrape -> webListen != "";
          message = "services.nxdns.monitoring.prometheusScrape needs /metrics, but settings.web.listen is \"\" (disabled).";
        }
        {
          assertion = lib.all (f: f == null || !lib.hasPrefix builtins.storeDir f) [
            cfg.web.passwordFile
            cfg.settings.web.password_file
          ];
          message = "services.nxdns: the web password hash is in the Nix store, readable by every user: set services.nxdns.web.passwordFile to a file outside it.";
        }
      ];

      warnings =
        lib.optional (listensOnWildcard53 && (config.services.resolved.enable or false)) ''
          services.nxdns listens on port 53 on every address while systemd-resolved
          is enabled: resolved's stub listener (127.0.0.53:53) can make that bind
          fail. Disable resolved, or its stub listener, or list nxdns's addresses.
        ''
        ++ lib.optional (acmeHost != null && tlsPorts == [ ]) ''
          services.nxdns.tls.acmeHost is set but settings.tls.dot_listen and
          doh_listen name no LAN address: nothing serves the certificate.
        ''
        ++ lib.optional (cfg.web.openFirewall && webPorts == [ ]) ''
          services.nxdns.web.openFirewall is set but settings.web.listen is a
          loopback address or disabled: no port is opened.
        '';

      environment.etc."nxdns/nxdns.toml".source = configFile;
      environment.systemPackages = [ cfg.package ];

      networking.firewall = lib.mkMerge [
        (lib.mkIf cfg.openFirewall {
          allowedTCPPorts = publicPorts ++ tlsPorts;
          allowedUDPPorts = publicPorts ++ doqPorts;
        })
        (lib.mkIf cfg.web.openFirewall { allowedTCPPorts = webPorts; })
      ];

      services.nxdns.settings.tls = lib.mkIf (acmeHost != null) {
        cert_file = lib.mkDefault "${acmeDir}/fullchain.pem";
        key_file = lib.mkDefault "${acmeDir}/key.pem";
      };
      services.nxdns.settings.web.password_file = lib.mkIf (cfg.web.passwordFile != null) passwordCredential;
      security.acme.certs = lib.mkIf (acmeHost != null) {
        ${acmeHost}.reloadServices = [ "nxdns.service" ];
      };

      system.checks =
        lib.optional (cfg.checkConfig && pkgs.stdenv.buildPlatform.canExecute pkgs.stdenv.hostPlatform)
          (
            pkgs.runCommand "nxdns-check-config" { preferLocalBuild = true; } ''
              ${lib.getExe cfg.package} check --config ${configFile}
              touch $out
            ''
          );

      systemd.services.nxdns = {
        description = "nxdns DNS forwarder";
        wantedBy = [ "multi-user.target" ];
        # acme-<name>.service (NixOS's acme module) puts the certificate, or
        # a self-signed placeholder before the first issuance, in place
        # without the network, so nxdns starts at once; ordering after
        # acme-order-renew-<name>.service, which needs DNS, could wait on
        # nxdns itself. The renewal reloads nxdns (reloadServices).
        wants = [
          "network-online.target"
          "nss-lookup.target"
        ]
        ++ lib.optional (acmeHost != null) "acme-${acmeHost}.service";
        after = [ "network-online.target" ] ++ lib.optional (acmeHost != null) "acme-${acmeHost}.service";
        before = [ "nss-lookup.target" ];

        # The unit reads the file through /etc, so a settings change leaves
        # ExecStart alone and `nixos-rebuild switch` reloads (SIGHUP) instead
        # of restarting: listeners stay bound, queries in flight finish on the
        # old configuration, and an invalid file (impossible after the
        # build-time check) would keep the running configuration.
        reloadTriggers = [ configFile ];

        # The LAN's only DNS server must never end up "failed": no start
        # limit, and a restart after every exit, with a delay growing from 1 s
        # to a minute (RestartSteps, systemd >= 254) so a crash loop does not
        # spin. (unitConfig rather than the startLimitIntervalSec shorthand:
        # the same [Unit] line, and visible in nixcheck's rendering.)
        unitConfig.StartLimitIntervalSec = 0;

        serviceConfig = {
          # `systemctl reload` (and `nixos-rebuild switch`) runs ExecReload:
          # `nxdns check --files` on the file and what it names (the password
          # credential, the certificate), then `nxdns reload`, which sends
          # SIGHUP and waits for the outcome nxdns writes to the status file
          # in /run/nxdns — so a reload nxdns rejects or cannot apply fails
          # the command, with the reason. (Type=notify-reload has no way to
          # say a reload failed: READY=1 ends it either way.) nxdns still
          # sends RELOADING=1 and READY=1 around it.
          Type = "notify";
          NotifyAccess = "main";
          ExecStart = utils.escapeSystemdExecArgs [
            (lib.getExe cfg.package)
            "run"
            "--config"
            configPath
            "--reload-status"
            "/run/nxdns/reload-status"
          ];
          ExecReload = [
            (utils.escapeSystemdExecArgs [
              (lib.getExe cfg.package)
              "check"
              "--files"
              "--config"
              configPath
            ])
            # $MAINPID unescaped: systemd substitutes it.
            "${lib.getExe cfg.package} reload --pid $MAINPID --status /run/nxdns/reload-status"
          ];
          # /run/nxdns: the reload status file, and nothing else.
          RuntimeDirectory = "nxdns";
          RuntimeDirectoryMode = "0700";
          Restart = "always";
          RestartSec = "1s";
          RestartSteps = 10;
          RestartMaxDelaySec = "1min";
          # nxdns sends WATCHDOG=1 at half this interval; a wedged process is
          # killed and restarted.
          WatchdogSec = "30s";
          # SIGTERM drains queries in flight for the longest budget plus a
          # second, and exits as soon as they are done. A fixed bound, not one
          # computed from the budgets: a changed unit would make `switch`
          # restart nxdns instead of reloading it. 130 s covers the largest
          # budget nxdns accepts (120 000 ms) with a margin.
          TimeoutStopSec = "130s";

          # /var/lib/nxdns (with DynamicUser: /var/lib/private/nxdns) for the
          # cache file, the downloaded lists (nxdns does not create
          # filter.state_dir) and the history. Fixed, not computed from
          # settings (see TimeoutStopSec).
          StateDirectory = [
            "nxdns"
            "nxdns/lists"
          ];
          StateDirectoryMode = "0700";

          # The web password hash (services.nxdns.web.passwordFile), copied by
          # systemd into /run/credentials/nxdns.service/, readable by nxdns
          # alone. A module option, not a setting: changing it restarts.
          LoadCredential = lib.mkIf (cfg.web.passwordFile != null) [
            "web-password:${cfg.web.passwordFile}"
          ];

          # No root: a dynamic user with only the capability to bind port 53.
          DynamicUser = true;
          AmbientCapabilities = [ "CAP_NET_BIND_SERVICE" ];
          CapabilityBoundingSet = [ "CAP_NET_BIND_SERVICE" ];
          NoNewPrivileges = true;
          # Read the ACME certificate and key (mode 0640, the cert's group).
          SupplementaryGroups = lib.mkIf (acmeHost != null) [ (acmeCert.group or "acme") ];
          # Not PrivateUsers: a capability held in a child user namespace does
          # not allow binding a privileged port in the host's network namespace.

          # Read-only system but the state directory.
          ProtectSystem = "strict";
          ProtectHome = true;
          PrivateTmp = true;
          PrivateDevices = true;
          PrivateMounts = true;
          DevicePolicy = "closed";
          ProtectClock = true;
          ProtectControlGroups = true;
          ProtectHostname = true;
          ProtectKernelLogs = true;
          ProtectKernelModules = true;
          ProtectKernelTunables = true;
          # Not ProcSubset = "pid": it hides /proc/stat, and the Prometheus
          # client then drops process_start_time_seconds from /metrics.
          ProtectProc = "invisible";
          RemoveIPC = true;
          UMask = "0077";

          # IPv4/IPv6 for DNS, upstreams and /metrics; AF_UNIX for sd_notify
          # (READY, RELOADING, STOPPING, WATCHDOG) and the journal; AF_NETLINK
          # for the host's interfaces (zone IDs such as fe80::1%eth0 in
          # dns.listen, and the "local" allow list) and its neighbour table
          # (devices by MAC, docs/devices.md).
          RestrictAddressFamilies = [
            "AF_INET"
            "AF_INET6"
            "AF_UNIX"
            "AF_NETLINK"
          ];
          RestrictNamespaces = true;
          RestrictRealtime = true;
          RestrictSUIDSGID = true;
          LockPersonality = true;
          MemoryDenyWriteExecute = true;
          SystemCallArchitectures = "native";
          SystemCallFilter = [
            "@system-service"
            "~@privileged"
          ];
          # A denied call fails with EPERM instead of killing the process: the
          # Go runtime probes a few calls and copes with refusals.
          SystemCallErrorNumber = "EPERM";
        };
      };
    })

    # Grafana and Prometheus on this host (services.nxdns.monitoring). The
    # conditions sit on the values, outside the mkIf above, so these option
    # names are known without evaluating cfg (nixcheck's stub of NixOS, where
    # services.grafana is undeclared, needs that; NixOS does not mind).
    {
      services.grafana.provision.enable = lib.mkIf (cfg.enable && cfg.monitoring.grafanaDashboard) true;
      services.grafana.provision.dashboards.settings.providers = lib.mkIf (cfg.enable && cfg.monitoring.grafanaDashboard) [
        {
          name = "nxdns";
          options.path = ./contrib/grafana;
        }
      ];
      services.prometheus.ruleFiles = lib.mkIf (cfg.enable && cfg.monitoring.prometheusRules) [
        ./contrib/prometheus/nxdns-rules.yml
      ];
      services.prometheus.scrapeConfigs = lib.mkIf (cfg.enable && cfg.monitoring.prometheusScrape) [
        {
          job_name = "nxdns";
          static_configs = [ { targets = [ scrapeTarget ]; } ];
        }
      ];
    }
  ];
}
