package vmtests

import (
	"fmt"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestForwardZoneOverDoTAndDoQ: the real binary sends a zone's queries to
// its encrypted resolver (docs/forward.md "Encrypted resolvers"): one zone
// over DoT, one over DoQ, each trusting the test CA through ca_file and
// checking the certificate's name through tls_name; the answers are the
// zone resolvers', not the pool's, and the query log names the resolver.
func TestForwardZoneOverDoTAndDoQ(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	dot := testutil.StartDoT(t, ca.CA, "resolver.corp.test", testutil.AnswerA("192.0.2.71"))
	doq := testutil.StartDoQ(t, ca.CA, "resolver.corp.test", testutil.AnswerA("192.0.2.72"))
	var extra string
	for _, z := range []struct{ zone, resolver string }{
		{"dot.corp.test", "tls://" + dot.Addr.String()},
		{"doq.corp.test", "quic://" + doq.Addr.String()},
	} {
		extra += fmt.Sprintf("[[forward_zones]]\nzone = %q\nresolver = %q\ntls_name = \"resolver.corp.test\"\nca_file = %q\n", z.zone, z.resolver, ca.file)
	}
	n := startNxdns(t, ca, settings{queryLog: true, extra: extra}, startUpstream(t, ca, "dot://127.0.0.1:0"))
	for _, c := range []struct{ name, want, resolver string }{
		{"host.dot.corp.test.", "192.0.2.71", "tls://" + dot.Addr.String()},
		{"host.doq.corp.test.", "192.0.2.72", "quic://" + doq.Addr.String()},
	} {
		r := n.ask(t, "udp", c.name, dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != c.want {
			t.Fatalf("%s: %v, want the zone resolver's %s", c.name, r, c.want)
		}
		if line := n.queryLog(t, c.name, 1)[0]; line["upstream"] != c.resolver {
			t.Errorf("%s: query log upstream %v, want %s", c.name, line["upstream"], c.resolver)
		}
	}
}
