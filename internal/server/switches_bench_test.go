package server

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// BenchmarkCacheHit_switches is BenchmarkCacheHit with the filter stage in
// front of the cache, for a client whose group has every catalogue service
// and every safe-search engine on ("on") against the same group with none
// ("off"), through the general path and the UDP fast path: the household
// switches' cost on a cache hit (docs/filter.md "Blocked services").
func BenchmarkCacheHit_switches(b *testing.B) {
	for _, on := range []bool{false, true} {
		g := config.FilterGroup{Name: "kids", Clients: []string{"127.0.0.1"}}
		name := "off"
		if on {
			name, g.Services, g.SafeSearch = "on", catalog.Services().IDs(), catalog.Engines
		}
		f := config.FilterDefaults()
		f.Groups = []config.FilterGroup{{Name: "default"}, g}
		e := filter.New(filter.Options{})
		e.Update(f)
		fs := e.NewStage(config.Config{Filter: f}, time.UTC)
		c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
		st := c.Stage()
		const qname = "h1.hit.example." // a name of no switch, as most are
		answer := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
			return reply(q, aRecord(qname, "192.0.2.1")), testUpstream, nil
		})
		s := New(Options{}, &State{Router: pool(answer), Allow: loopback, Stages: []query.Stage{fs, st}})
		q := newQuery(qname, dns.TypeA)
		q.SetEdns0(1232, false)
		wire, _ := q.Pack()
		client := netip.MustParseAddr("127.0.0.1")
		ctx := context.Background()
		for range 2 {
			s.handle(ctx, wire, client, query.UDP)
		}
		b.Run(name+"/general", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.handle(ctx, wire, client, query.UDP) == nil {
					b.Fatal("no answer")
				}
			}
		})
		b.Run(name+"/fast", func(b *testing.B) {
			var qname [wireform.MaxName]byte
			dst := make([]byte, 0, maxUDPAnswer)
			var scratch query.Event
			b.ReportAllocs()
			for b.Loop() {
				out, gen, ev, ok := s.answerFast(wire, &qname, client, dst, &scratch)
				if !ok || len(out) == 0 {
					b.Fatal("not answered by the fast path")
				}
				s.finishFast(gen, ev, true)
			}
		})
		st.Close()
		c.Close()
		e.Close()
	}
}
