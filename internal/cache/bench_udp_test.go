package cache_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

type instantResolver struct{}

func (instantResolver) Exchange(_ context.Context, q *dns.Msg) (upstream.Result, error) {
	const up = "tls://192.0.2.53:853"
	return upstream.Result{Msg: answerA("192.0.2.1", 3600)(q), Upstream: up, Tried: []string{up}}, nil
}

type poolOnly struct{}

func (poolOnly) Route(string) (server.Resolver, string) { return instantResolver{}, query.SourcePool }

// BenchmarkHitUDP is a cache hit as a client sees it: one query and its
// answer over loopback UDP through the real server and the cache stage,
// the client's own send and receive included. Compare BenchmarkUDP in
// internal/server (the same without the cache, answered by the route).
func BenchmarkHitUDP(b *testing.B) {
	c := cache.New(cache.Options{Size: 10000, MaxTTL: time.Hour, StaleMaxAge: time.Hour, Prefetch: true})
	defer c.Close()
	stage := c.Stage()
	defer stage.Close()
	srv := server.New(server.Options{}, &server.State{
		Router: poolOnly{}, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Stages: []query.Stage{stage},
	})
	if err := srv.Listen([]string{"127.0.0.1:0"}); err != nil {
		b.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	udp, _ := srv.Addrs()
	q := new(dns.Msg).SetQuestion("bench.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire, _ := q.Pack()
	if _, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(q, udp[0].String()); err != nil {
		b.Fatal(err) // the miss that fills the entry
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.SetParallelism(4) // a handful of clients, under the listener's in-flight cap
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
	if s := c.Snapshot(); s.Hits == 0 {
		b.Error("no cache hits")
	}
}
