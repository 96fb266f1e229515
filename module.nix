# NixOS module for nxdns: services.nxdns.{enable,package,settings,openFirewall,checkConfig}.
#
# Modelled on nixpkgs' blocky, adguardhome, routedns (settings rendered with
# pkgs.formats) and unbound (config in /etc, reload by SIGHUP, Type=notify,
# hardening). `package` has no default here because nixpkgs has no
# `pkgs.nxdns`: the flake's nixosModules.default imports this file and sets
# it to the flake's own build.
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

  # A typed option whose unset value (null) is left out of the file, so
  # nxdns's own default applies (SPEC §3 is the one table of defaults).
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
          default is loopback:5353).
        '';
      };
      allow = optional (types.listOf types.str) ''
        Client prefixes (CIDR) that are answered; others get REFUSED.
        `null` keeps nxdns's default: loopback, RFC 1918, ULA and link-local.
      '';
    };
  };

  budgetMs = types.ints.between 100 120000;
  upstreamSection = {
    options = {
      attempt_timeout_ms = optional budgetMs "One attempt against one upstream, connect included (default 2000).";
      total_timeout_ms = optional budgetMs "Per-query budget of the upstream pool: every wait and attempt together (default 4000).";
      read_timeout_ms = optional budgetMs "Whole forward-zone exchange: UDP, TC=1 fallback and TCP retry together (default 3000).";
    };
  };

  upstreamEntry = {
    options = {
      url = mkOption {
        type = types.strMatching "^(tls|https)://.+";
        example = "tls://dns.quad9.net";
        description = "`tls://host[:port]` (DoT, port 853) or `https://host[:port]/path` (DoH, port 443).";
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
        type = types.strMatching "^(udp|tcp)://.+:[0-9]+$";
        example = "udp://192.168.1.1:53";
        description = "The LAN resolver: `udp://IP:port` or `tcp://IP:port`.";
      };
    };
  };

  staticClient = {
    options = {
      ip = mkOption {
        type = types.str;
        description = "Client IP address.";
      };
      name = mkOption {
        type = types.str;
        description = "Name shown for this client in logs and metrics.";
      };
    };
  };

  webSection = {
    options.listen = optional hostPortOrEmpty ''
      Address of /metrics and /api/health; "" disables them. nxdns's default
      is 127.0.0.1:9153. `openFirewall` does not open it.
    '';
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

  settingsModule = {
    freeformType = format.type;
    options = {
      dns = section dnsSection "Listeners and access control.";
      upstream = section upstreamSection "Time budgets shared by all upstreams.";
      upstreams = list upstreamEntry ''
        Encrypted upstream resolvers, tried by priority. `null` keeps
        nxdns's built-in pair (Quad9 and Cloudflare over DoT).
      '';
      forward_zones = list forwardZone "Conditional forwarding of local zones to the LAN's resolver.";
      clients = list staticClient "Static client names for logs and metrics.";
      web = section webSection "The metrics and health endpoint.";
      log = section logSection "Logging to the journal.";
    };
  };

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
  # SIGTERM drains queries in flight for the longest query budget plus a
  # second (nxdns's DrainBound); systemd must wait at least that long before
  # it kills. nxdns's own defaults apply when the keys are unset.
  orDefault = v: d: if v == null then d else v;
  drainSeconds =
    let
      u = cfg.settings.upstream;
    in
    # Rounded up: Nix's integer division truncates.
    ((lib.max (orDefault u.total_timeout_ms 4000) (orDefault u.read_timeout_ms 3000)) + 999) / 1000 + 1;

  isLoopback = host: lib.hasPrefix "127." host || host == "::1" || host == "localhost";
  publicPorts = lib.unique (
    map (a: a.port) (lib.filter (a: !isLoopback a.host) (map splitListen cfg.settings.dns.listen))
  );
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
        docs/SPEC.md §3 for every key). Options left `null` are omitted and
        take nxdns's defaults. Changing settings reloads nxdns (SIGHUP)
        instead of restarting it; an invalid file is rejected at build time
        by `nxdns check`.
      '';
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Open the DNS ports of `settings.dns.listen` (TCP and UDP, loopback
        addresses excluded) in the firewall. The metrics endpoint is not opened.
      '';
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

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.settings.dns.listen != [ ];
        message = "services.nxdns.settings.dns.listen is empty: nxdns would answer nobody.";
      }
    ];

    warnings = lib.optional (listensOnWildcard53 && (config.services.resolved.enable or false)) ''
      services.nxdns listens on port 53 on every address while systemd-resolved
      is enabled: resolved's stub listener (127.0.0.53:53) can make that bind
      fail. Disable resolved, or its stub listener, or list nxdns's addresses.
    '';

    environment.etc."nxdns/nxdns.toml".source = configFile;
    environment.systemPackages = [ cfg.package ];

    networking.firewall = lib.mkIf cfg.openFirewall {
      allowedTCPPorts = publicPorts;
      allowedUDPPorts = publicPorts;
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
      wants = [
        "network-online.target"
        "nss-lookup.target"
      ];
      after = [ "network-online.target" ];
      before = [ "nss-lookup.target" ];

      # The unit reads the file through /etc, so a settings change leaves
      # ExecStart alone and `nixos-rebuild switch` reloads (SIGHUP) instead
      # of restarting: listeners stay bound, queries in flight finish on the
      # old configuration, and an invalid file (impossible after the
      # build-time check) would keep the running configuration.
      reloadTriggers = [ configFile ];

      startLimitIntervalSec = 60;
      startLimitBurst = 5;

      serviceConfig = {
        Type = "notify";
        NotifyAccess = "main";
        ExecStart = utils.escapeSystemdExecArgs [
          (lib.getExe cfg.package)
          "run"
          "--config"
          configPath
        ];
        ExecReload = "${lib.getExe' pkgs.coreutils "kill"} -HUP $MAINPID";
        Restart = "on-failure";
        RestartSec = "2s";
        # nxdns sends WATCHDOG=1 at half this interval; a wedged process is
        # killed and restarted.
        WatchdogSec = "30s";
        # SIGTERM drains in-flight queries, bounded by the query budget.
        TimeoutStopSec = "${toString (drainSeconds + 10)}s";

        # No root: a dynamic user with only the capability to bind port 53.
        DynamicUser = true;
        AmbientCapabilities = [ "CAP_NET_BIND_SERVICE" ];
        CapabilityBoundingSet = [ "CAP_NET_BIND_SERVICE" ];
        NoNewPrivileges = true;
        # Not PrivateUsers: a capability held in a child user namespace does
        # not allow binding a privileged port in the host's network namespace.

        # Read-only system; nxdns writes nothing (its state is in memory).
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
        ProtectProc = "invisible";
        ProcSubset = "pid";
        RemoveIPC = true;
        UMask = "0077";

        # IPv4/IPv6 for DNS, upstreams and /metrics; AF_UNIX for sd_notify
        # (READY, RELOADING, STOPPING, WATCHDOG) and the journal.
        RestrictAddressFamilies = [
          "AF_INET"
          "AF_INET6"
          "AF_UNIX"
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
  };
}
