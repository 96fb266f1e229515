package filter_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

type instant struct{}

func (instant) Exchange(_ context.Context, q *dns.Msg) (upstream.Result, error) {
	r := new(dns.Msg).SetReply(q)
	r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.IPv4(192, 0, 2, 1)})
	return upstream.Result{Msg: r, Upstream: "tls://192.0.2.53:853"}, nil
}

type poolOnly struct{}

func (poolOnly) Route(string) (server.Resolver, string) { return instant{}, query.SourcePool }

// BenchmarkHitUDP_switches is a cache hit over loopback UDP through the
// real server, the filter stage and the cache, for a client whose group
// has every catalogue service and every safe-search engine on ("on"),
// against the same group with none ("off"): the household switches'
// whole cost on the hottest path (docs/performance.md).
func BenchmarkHitUDP_switches(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		g := config.FilterGroup{Name: "kids", Clients: []string{"127.0.0.1"}}
		if on {
			name = "on"
			g.Services, g.SafeSearch = catalog.Services().IDs(), catalog.Engines
		}
		b.Run(name, func(b *testing.B) {
			f := config.FilterDefaults()
			f.Groups = []config.FilterGroup{{Name: "default"}, g}
			e := filter.New(filter.Options{})
			defer e.Close()
			e.Update(f)
			fs := e.NewStage(config.Config{Filter: f}, time.UTC)
			c := cache.New(cache.Options{Size: 10000, MaxTTL: time.Hour, StaleMaxAge: time.Hour})
			defer c.Close()
			cs := c.Stage()
			defer cs.Close()
			srv := server.New(server.Options{}, &server.State{
				Router: poolOnly{}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Stages: []query.Stage{fs, cs},
			})
			if err := srv.Listen([]string{"127.0.0.1:0"}); err != nil {
				b.Fatal(err)
			}
			defer srv.Shutdown(context.Background())
			udp, _ := srv.Addrs()
			q := new(dns.Msg).SetQuestion("www.example.co.uk.", dns.TypeA)
			q.SetEdns0(1232, false)
			wire, _ := q.Pack()
			for range 2 { // the miss that fills the entry, the hit that leaves the template
				if _, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(q, udp[0].String()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.SetParallelism(4)
			b.RunParallel(func(pb *testing.PB) {
				conn, err := net.Dial("udp", udp[0].String())
				if err != nil {
					b.Error(err)
					return
				}
				defer conn.Close()
				buf := make([]byte, 1232)
				for pb.Next() {
					if _, err := conn.Write(wire); err != nil {
						b.Error(err)
						return
					}
					conn.SetReadDeadline(time.Now().Add(5 * time.Second))
					if _, err := conn.Read(buf); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
