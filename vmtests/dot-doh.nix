# docs/design.md#tls-serving: the client node queries the resolver node over DoT (kdig +tls,
# Android's Private DNS in miniature) and DoH (kdig +https, curl) with a CA
# it trusts, the resolver advertises both by DDR (RFC 9462), and /metrics
# counts the queries by proto. The certificate is issued by the test CA for
# dns.home.test; the client's trust store holds that CA and /etc/hosts maps
# the name, as a LAN's DNS-01 certificate and local name would.
#
# The resolver sets the module's typed settings.tls by hand (a VM has no
# ACME CA; services.nxdns.tls.acmeHost, docs/how-to/serve-dot-doh.md, sets
# cert_file and key_file on a real host), and the module's openFirewall
# opens 853 and 443: the client reaching them checks that too.
{ self, pkgs }:
let
  c = import ./common.nix { inherit self pkgs; };
  tlsName = "dns.home.test";
  # The resolver's serving pair, issued by the VM test CA: leaf then CA in
  # fullchain.pem, as an ACME client writes it. World-readable in the store,
  # which the test accepts (a real key lives in /var/lib/acme, group-readable).
  leaf = pkgs.runCommand "nxdns-vmtest-dot-doh-cert" { nativeBuildInputs = [ pkgs.openssl ]; } ''
    mkdir -p $out
    openssl ecparam -name prime256v1 -genkey -noout -out $out/key.pem
    openssl req -new -key $out/key.pem -subj "/CN=${tlsName}" -out leaf.csr
    printf 'subjectAltName = DNS:${tlsName}\nextendedKeyUsage = serverAuth\nkeyUsage = critical, digitalSignature\n' > ext.cnf
    openssl x509 -req -in leaf.csr -CA ${c.ca}/ca.pem -CAkey ${c.ca}/ca.key -CAcreateserial \
      -days 365 -sha256 -extfile ext.cnf -out leaf.pem
    cat leaf.pem ${c.ca}/ca.pem > $out/fullchain.pem
    openssl verify -CAfile ${c.ca}/ca.pem leaf.pem
  '';
in
{
  name = "nxdns-dot-doh";

  nodes = {
    upstream =
      { config, ... }:
      c.upstreamNode [
        (c.fakeup {
          name = "nxdns-fakeup-primary";
          listen = [ (c.dot config.networking.primaryIPAddress "") ];
          http = c.primaryHttp;
        })
      ];

    resolver = {
      imports = [
        (c.resolverNode (nodes: {
          upstreams = [ (c.primaryUpstream nodes) ];
          tls = {
            cert_file = "${leaf}/fullchain.pem";
            key_file = "${leaf}/key.pem";
            dot_listen = [ "0.0.0.0:853" ];
            doh_listen = [ "0.0.0.0:443" ];
          };
        }))
      ];
    };

    client =
      { nodes, ... }:
      {
        imports = [ c.clientNode ];
        security.pki.certificateFiles = [ "${c.ca}/ca.pem" ];
        networking.hosts.${nodes.resolver.networking.primaryIPAddress} = [ tlsName ];
        environment.systemPackages = [ pkgs.curl ];
      };
  };

  testScript =
    { nodes, ... }:
    c.pythonHelpers nodes
    + ''
      import base64
      import struct

      NAME = "${tlsName}"
      CA = "${c.ca}/ca.pem"

      start_all()
      upstream.wait_for_unit("nxdns-fakeup-primary.service")
      upstream.wait_for_open_port(853, UPSTREAM)
      start_resolver()
      resolver.wait_for_open_port(853)
      resolver.wait_for_open_port(443)


      def dns_query(name: str) -> bytes:
          """A wire-format A query with ID 0 (RFC 8484 §4.1)."""
          labels = b"".join(bytes([len(p)]) + p.encode() for p in name.strip(".").split("."))
          return struct.pack(">HHHHHH", 0, 0x0100, 1, 0, 0, 0) + labels + b"\x00" + struct.pack(">HH", 1, 1)


      with subtest("DoT: kdig +tls verifies the certificate and gets the answer"):
          out = client.succeed(
              f"kdig @{NAME} +tls +tls-ca={CA} +tls-hostname={NAME} +timeout=6 +retry=0 dot.example.org A"
          )
          assert "NOERROR" in out and "dot.example.org." in out, out
          # A name the certificate lacks is refused: verification is real.
          client.fail(
              f"kdig @{NAME} +tls +tls-ca={CA} +tls-hostname=other.home.test +timeout=6 +retry=0 bad.example.org A | grep -q NOERROR"
          )

      with subtest("DoH: kdig +https and curl (system trust store) get answers"):
          out = client.succeed(
              f"kdig @{NAME} +https +tls-ca={CA} +tls-hostname={NAME} +timeout=6 +retry=0 doh.example.org A"
          )
          assert "NOERROR" in out and "doh.example.org." in out, out
          q = base64.urlsafe_b64encode(dns_query("curl-get.example.org")).decode().rstrip("=")
          client.succeed(
              f"curl -sf --http2 -o /tmp/get.bin -D /tmp/get.h 'https://{NAME}/dns-query?dns={q}'"
          )
          headers = client.succeed("cat /tmp/get.h").lower()
          assert "content-type: application/dns-message" in headers, headers
          assert "cache-control: max-age=" in headers, headers
          escaped = "".join(f"\\x{b:02x}" for b in dns_query("curl-post.example.org"))
          client.succeed(f"printf '{escaped}' > /tmp/q.bin")
          client.succeed(
              f"curl -sf --http1.1 -H 'content-type: application/dns-message' --data-binary @/tmp/q.bin -o /tmp/post.bin https://{NAME}/dns-query"
          )
          code = client.succeed(
              f"curl -s -o /dev/null -w '%{{http_code}}' -X PUT https://{NAME}/dns-query"
          )
          assert code == "405", code

      with subtest("DDR advertises DoT and DoH over plain DNS"):
          out = client.succeed(f"kdig @{RESOLVER} +timeout=6 +retry=0 _dns.resolver.arpa SVCB")
          assert 'alpn="dot"' in out and 'alpn="h2"' in out and NAME in out, out

      with subtest("/metrics counts the queries by proto and shows the expiry"):
          m = metrics_text()
          assert metric(m, "nxdns_queries_by_proto_total", proto="dot") >= 1, m
          assert metric(m, "nxdns_queries_by_proto_total", proto="doh") >= 3, m
          assert metric(m, "nxdns_tls_cert_expiry_timestamp_seconds") > 0, m
          assert metric(m, "nxdns_doh_errors_total", status="405") == 1, m
    '';
}
