# Shared pieces of the VM tests (docs/design.md#scenarios): a test CA, the three nodes and the
# Python helpers of the test scripts.
#
#   client    192.168.1.1  runs nxdns-burst and kdig
#   resolver  192.168.1.2  runs nxdns through this flake's module, port 53
#   upstream  192.168.1.3  runs nxdns-fakeup: a DoT primary (853) and a DoH standby (443)
#
# (Addresses follow the alphabetical order of the node names; the tests use
# nodes.<name>.networking.primaryIPAddress, never the literals.)
{ self, pkgs }:
let
  inherit (pkgs) lib;
  testbed = self.packages.${pkgs.stdenv.hostPlatform.system}.nxdns-testbed;
in
rec {
  # A throwaway CA. nxdns-fakeup loads it (-ca-cert/-ca-key; the key must be
  # an "EC PRIVATE KEY", internal/certs.LoadCA) and issues its own leaf for
  # -cert-names, with every DNS name and IP in the subjectAltName (Go ignores
  # the common name). The resolver trusts the CA through
  # security.pki.certificateFiles (the DoT primary) and through `ca_file`
  # (the DoH standby), so both trust paths are exercised.
  ca = pkgs.runCommand "nxdns-vmtest-ca" { nativeBuildInputs = [ pkgs.openssl ]; } ''
    cat > ca.cnf <<'EOF'
    [req]
    distinguished_name = dn
    prompt = no
    x509_extensions = v3_ca
    [dn]
    CN = nxdns VM test CA
    [v3_ca]
    basicConstraints = critical, CA:TRUE
    keyUsage = critical, keyCertSign, cRLSign
    subjectKeyIdentifier = hash
    EOF
    mkdir -p $out
    openssl ecparam -name prime256v1 -genkey -noout -out $out/ca.key
    openssl req -x509 -new -config ca.cnf -key $out/ca.key -sha256 -days 3650 -out $out/ca.pem
    openssl x509 -in $out/ca.pem -noout -subject -dates
  '';

  primaryName = "primary.test";
  standbyName = "standby.test";

  # HTTP ports of the fake upstreams' /counters and /healthz (loopback only).
  primaryHttp = 8081;
  standbyHttp = 8082;

  # The two upstreams as nxdns sees them; primary first, so its metrics
  # index is 0 whether nxdns numbers entries by file order or by priority.
  primaryUpstream = nodes: {
    url = "tls://${primaryName}";
    address = nodes.upstream.networking.primaryIPAddress;
    priority = 0;
  };
  standbyUpstream = nodes: {
    url = "https://${standbyName}/dns-query";
    address = nodes.upstream.networking.primaryIPAddress;
    ca_file = "${ca}/ca.pem";
    priority = 1;
  };

  # One nxdns-fakeup process as a systemd service. `autoStart = false` makes
  # a unit the test script starts itself (to swap a healthy primary for a
  # stalled one on the same port).
  fakeup =
    {
      name,
      listen,
      http,
      autoStart ? true,
    }:
    {
      config,
      lib,
      utils,
      ...
    }:
    {
      systemd.services.${name} = {
        description = "nxdns fake upstream ${name}";
        wantedBy = lib.optional autoStart "multi-user.target";
        after = [ "network.target" ];
        serviceConfig = {
          ExecStart = utils.escapeSystemdExecArgs (
            [ (lib.getExe' testbed "nxdns-fakeup") ]
            ++ lib.concatMap (l: [
              "-listen"
              l
            ]) listen
            ++ [
              "-ca-cert"
              "${ca}/ca.pem"
              "-ca-key"
              "${ca}/ca.key"
              "-cert-names"
              "${primaryName},${standbyName},${config.networking.primaryIPAddress}"
              "-http"
              "127.0.0.1:${toString http}"
            ]
          );
          Restart = "on-failure";
        };
      };
    };

  # Listen URLs of the fake upstreams, on the upstream node's own address.
  dot = ip: query: "dot://${ip}:853${lib.optionalString (query != "") "?${query}"}";
  doh = ip: query: "doh://${ip}:443/dns-query${lib.optionalString (query != "") "?${query}"}";

  upstreamNode = extra: {
    imports = extra;
    networking.firewall.allowedTCPPorts = [
      853
      443
    ];
    environment.systemPackages = [ pkgs.curl ];
    # The round trip a Pi has to a public resolver (docs/design.md#lesson-round-trips): every
    # packet the upstream node sends waits 30 ms (±4), so each TCP connect,
    # TLS handshake and query to it costs a real round trip. Only this node
    # delays, so the client's path to the resolver stays a LAN.
    systemd.services.netem = {
      wantedBy = [ "multi-user.target" ];
      after = [ "network-online.target" ];
      wants = [ "network-online.target" ];
      serviceConfig.Type = "oneshot";
      script = "${pkgs.iproute2}/bin/tc qdisc replace dev eth1 root netem delay 30ms 4ms";
    };
  };

  resolverNode =
    settings:
    { nodes, pkgs, ... }:
    {
      imports = [ self.nixosModules.default ];
      services.nxdns = {
        enable = true;
        openFirewall = true;
        # The fake upstreams sign nothing and serve no real root: DNSSEC
        # validation (default shadow) would only add DS/DNSKEY lookups to
        # their counters. A scenario that sets dnssec itself replaces this.
        settings = { dnssec.mode = "off"; } // settings nodes;
      };
      security.pki.certificateFiles = [ "${ca}/ca.pem" ];
      environment.systemPackages = [
        pkgs.curl
        pkgs.knot-dns
      ];
    };

  clientNode =
    { pkgs, ... }:
    {
      environment.systemPackages = [
        testbed
        pkgs.knot-dns
      ];
    };

  # Python shared by the test scripts (the driver type-checks and lints it:
  # keep it typed and free of unused names).
  # The three nodes of the failover scenarios: on the upstream node a DoT
  # primary in two variants on one address (healthy, and stalled: accepts,
  # never answers), only one running at a time, and a DoH standby; the
  # resolver uses primary then standby at the shipped budgets.
  # stalledFirst picks which primary variant starts with the node.
  failoverNodes =
    { stalledFirst }:
    {
      upstream =
        { config, ... }:
        let
          ip = config.networking.primaryIPAddress;
        in
        upstreamNode [
          (fakeup {
            name = "nxdns-fakeup-primary";
            listen = [ (dot ip "latency=20ms") ];
            http = primaryHttp;
            autoStart = !stalledFirst;
          })
          (fakeup {
            name = "nxdns-fakeup-primary-stall";
            listen = [ (dot ip "stall=1") ];
            http = primaryHttp;
            autoStart = stalledFirst;
          })
          (fakeup {
            name = "nxdns-fakeup-standby";
            listen = [ (doh ip "latency=20ms") ];
            http = standbyHttp;
          })
        ];

      # The shipped budgets (attempt 2000 ms, total 4000 ms): nothing set.
      resolver = resolverNode (nodes: {
        upstreams = [
          (primaryUpstream nodes)
          (standbyUpstream nodes)
        ];
      });

      client = clientNode;
    };

  pythonHelpers = nodes: ''
    import json
    import re

    RESOLVER = "${nodes.resolver.networking.primaryIPAddress}"
    UPSTREAM = "${nodes.upstream.networking.primaryIPAddress}"
    PRIMARY_HTTP = ${toString primaryHttp}
    STANDBY_HTTP = ${toString standbyHttp}
    BACKOFF = "upstream entering backoff"
    RECOVERED = "upstream recovered"

    SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
    LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


    def burst(args: str) -> dict:
        """Run nxdns-burst on the client against the resolver; its JSON summary."""
        out = client.succeed(
            f"nxdns-burst -target {RESOLVER}:53 {args} 2>/tmp/burst.log"
        )
        print(f"nxdns-burst {args}: {out.strip()}")
        return json.loads(out)


    def assert_clean(r: dict) -> None:
        """Every query answered NOERROR: no SERVFAIL, no timeout, no error."""
        rcodes = r["rcodes"]
        assert rcodes.get("SERVFAIL", 0) == 0, f"SERVFAILs: {r}"
        assert r["timeouts"] == 0, f"timeouts: {r}"
        assert r["errors"] == 0, f"errors: {r}"
        assert r["queries"] > 0, f"no queries: {r}"
        assert rcodes.get("NOERROR", 0) == r["queries"], f"not all NOERROR: {r}"


    def query_ok(name: str) -> None:
        out = client.succeed(f"kdig @{RESOLVER} +timeout=6 +retry=0 {name} A")
        assert "NOERROR" in out, out


    def metrics_text() -> str:
        return resolver.succeed("curl -sf http://127.0.0.1:9153/metrics")


    def has_metric(text: str, name: str) -> bool:
        for line in text.splitlines():
            m = SAMPLE.match(line)
            if m is not None and m.group(1) == name:
                return True
        return False


    def metric(text: str, name: str, **labels: str) -> float:
        """Sum of the samples of `name` whose labels include `labels` (0 if none)."""
        total = 0.0
        for line in text.splitlines():
            m = SAMPLE.match(line)
            if m is None or m.group(1) != name:
                continue
            have = dict(LABEL.findall(m.group(2) or ""))
            if all(have.get(k) == v for k, v in labels.items()):
                total += float(m.group(3))
        return total


    def counters(port: int) -> dict:
        """A fake upstream's counters (queries, connections, handshakes, answered …)."""
        out = upstream.succeed(f"curl -sf http://127.0.0.1:{port}/counters")
        print(f"fake upstream :{port} counters: {out.strip()}")
        return json.loads(out)


    def journal_count(needle: str) -> int:
        out = resolver.succeed("journalctl -u nxdns.service --no-pager -o cat")
        return sum(1 for line in out.splitlines() if needle in line)


    def wait_for_journal(needle: str, timeout: int) -> None:
        resolver.wait_until_succeeds(
            f"journalctl -u nxdns.service --no-pager -o cat | grep -qF '{needle}'",
            timeout=timeout,
        )


    def start_resolver() -> None:
        resolver.wait_for_unit("nxdns.service")
        resolver.wait_for_open_port(53)
        resolver.wait_for_open_port(9153, "127.0.0.1")
        client.wait_for_unit("multi-user.target")
  '';
}
