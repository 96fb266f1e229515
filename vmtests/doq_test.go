package vmtests

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// TestServedDoQ: the real binary serves DNS over QUIC on tls.doq_listen
// behind the DoT certificate (docs/server.md "DNS over QUIC"). kdig +quic
// (knot's ngtcp2 client, which nobody here wrote) and nxdns's own DoQ
// upstream client each get the pool's answer, verified against the test CA
// and the name dns.home.test, and the query log says proto doq.
func TestServedDoQ(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	doq := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), testutil.FreePort(t))
	n := startTLSNode(t, ca, nil, startUpstream(t, ca, "dot://127.0.0.1:0"), fmt.Sprintf("doq_listen = [%q]\n", doq))

	t.Run("upstream client", func(t *testing.T) {
		ep, err := upstream.ParseEndpoint(fmt.Sprintf("quic://dns.home.test:%d", doq.Port()), "127.0.0.1", "")
		if err != nil {
			t.Fatal(err)
		}
		c := upstream.NewDoQ(ep, ca.Pool(), nil)
		defer c.Close()
		name := "doq-client.example.org."
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := c.Exchange(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != fakeup.AddressV4(name).String() {
			t.Fatalf("answer %v, want %s", resp.Answer, fakeup.AddressV4(name))
		}
		if line := n.queryLog(t, name, 1)[0]; line["proto"] != "doq" {
			t.Errorf("query log proto %v, want doq", line["proto"])
		}
	})

	t.Run("kdig", func(t *testing.T) {
		kdig := tool(t, "kdig", "knot-dnsutils")
		name := "kdig-quic.example.org."
		host, port, _ := net.SplitHostPort(doq.String())
		out, err := run(t, kdig, "@"+host, "-p", port, "+quic", "+tls-ca="+n.ca.file, "+tls-hostname=dns.home.test",
			"+timeout=5", "+retry=0", name, "A")
		if strings.Contains(out, "(TCP)") {
			t.Skip("this kdig is built without QUIC (no libngtcp2)")
		}
		want := fakeup.AddressV4(name).String()
		if err != nil || !strings.Contains(out, "NOERROR") || !strings.Contains(out, want) {
			t.Fatalf("kdig +quic: %v, want NOERROR with %s\n%s", err, want, out)
		}
		if line := n.queryLog(t, name, 1)[0]; line["proto"] != "doq" {
			t.Errorf("query log proto %v, want doq", line["proto"])
		}
	})
}
