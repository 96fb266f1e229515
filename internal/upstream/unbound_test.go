package upstream

import (
	"sync"
	"testing"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestUnboundInterop resolves through a real unbound over DoT (and DoH when
// unbound is built with nghttp2): interoperability with a server we did not
// write, including pipelining and the question's case.
func TestUnboundInterop(t *testing.T) {
	ca := testutil.NewCA(t)
	u := testutil.StartUnbound(t, ca, testutil.UnboundOptions{
		LocalZone: "nxdns.test.",
		LocalData: []string{"host.nxdns.test. A 192.0.2.10"},
	})
	clients := map[string]Client{
		"DoT": NewDoT(transportEndpoint(t, u.DoTURL, u.DoTAddr), ca.Pool(), nil),
	}
	if u.DoHURL != "" {
		clients["DoH"] = NewDoH(transportEndpoint(t, u.DoHURL, u.DoHAddr), ca.Pool(), nil)
	} else {
		t.Log("unbound is built without nghttp2: DoH interop not tested")
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			defer c.Close()
			unboundResolve(t, c, "host.nxdns.test.")
			unboundResolve(t, c, "HoSt.NxDnS.tEsT.") // validation compares names case-insensitively
			var wg sync.WaitGroup
			for range 10 { // pipelined on DoT, multiplexed on DoH
				wg.Go(func() { unboundResolve(t, c, "host.nxdns.test.") })
			}
			wg.Wait()
		})
	}
}

func unboundResolve(t *testing.T, c Client, name string) {
	t.Helper()
	q := transportQuery(name)
	r, err := c.Exchange(transportCtx(t), q)
	if err != nil {
		t.Errorf("resolve %s: %v", name, err)
		return
	}
	if r.Id != q.Id || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("resolve %s: id %d (want %d), rcode %s, answer %v", name, r.Id, q.Id, dns.RcodeToString[r.Rcode], r.Answer)
		return
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != "192.0.2.10" {
		t.Errorf("resolve %s: answer %v, want A 192.0.2.10", name, r.Answer[0])
	}
}
