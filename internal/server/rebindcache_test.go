package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/rebind"
)

// TestRebinding_nxdomainRefusalIsNeverCached: with rebinding_answer =
// "nxdomain" the refusal is an answer the cache could keep, unlike
// SERVFAIL; it must not (docs/protocol.md "Rebinding protection"), or an
// allow from the dashboard would not take effect until it expired. Each
// query asks the upstream again and gets the refusal again.
func TestRebinding_nxdomainRefusalIsNeverCached(t *testing.T) {
	var asked atomic.Int64
	up := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		asked.Add(1)
		return reply(q, aRecord(q.Question[0].Name, "192.168.1.1")), testUpstream, nil
	})
	c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	s := startServer(t, &State{Router: pool(up), Allow: loopback, Stages: []query.Stage{st},
		Guard: rebind.New(rebind.Options{NXDomain: true})})
	for i := range 3 {
		if m := exchange(t, "udp", udpAddr(s), newQuery("rebind.example.", dns.TypeA)); m.Rcode != dns.RcodeNameError || len(m.Answer) != 0 {
			t.Fatalf("query %d: %v, want the refusal's NXDOMAIN", i, m)
		}
	}
	if n := asked.Load(); n != 3 {
		t.Errorf("the upstream was asked %d times for 3 queries, want 3: a refusal was cached", n)
	}
}
