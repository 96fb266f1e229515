package forward

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestInterop_Dnsmasq resolves through Debian's dnsmasq, a home router's
// resolver we did not write, over UDP and TCP: an A record of the lan zone, a
// PTR of the reverse zone, and the same PTR learned as a client name.
func TestInterop_Dnsmasq(t *testing.T) {
	addr := testutil.StartDnsmasq(t, "192.168.1.50 host.lan").Addr
	for _, scheme := range []string{"udp", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			tab := newTestTable(t, 3*time.Second,
				"lan", scheme+"://"+addr.String(),
				"168.192.in-addr.arpa", scheme+"://"+addr.String())

			z, ok := tab.Match("host.lan.")
			if !ok {
				t.Fatal("no zone for host.lan.")
			}
			resp, up, err := z.Resolve(t.Context(), queryA("host.lan."))
			if err != nil {
				t.Fatalf("A host.lan: %v", err)
			}
			if got := firstA(resp); got != "192.168.1.50" || resp.Rcode != dns.RcodeSuccess {
				t.Errorf("A host.lan = %q (%s), want 192.168.1.50", got, dns.RcodeToString[resp.Rcode])
			}
			if up != scheme+"://"+addr.String() {
				t.Errorf("upstream %q, want %s://%s", up, scheme, addr)
			}

			z, ok = tab.Match(ptr50)
			if !ok || z.Name() != "168.192.in-addr.arpa." {
				t.Fatalf("no reverse zone for %s", ptr50)
			}
			resp, _, err = z.Resolve(t.Context(), new(dns.Msg).SetQuestion(ptr50, dns.TypePTR))
			if err != nil {
				t.Fatalf("PTR: %v", err)
			}
			if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "host.lan." {
				t.Errorf("PTR answer %v, want host.lan.", resp.Answer)
			}

			// The same through Names, as the query log would learn it.
			n := NewNames(nil, tab, NamesOptions{Allowed: testAllow})
			stored := make(chan storedName, 1)
			n.stored = func(ip netip.Addr, name string) { stored <- storedName{ip, name} }
			defer n.Close()
			n.Name(client50)
			if s := waitStored(t, stored); s.name != "host.lan" {
				t.Errorf("learned %q, want host.lan", s.name)
			}
		})
	}
}
