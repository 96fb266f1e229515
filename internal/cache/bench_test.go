package cache

import (
	"context"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// BenchmarkHit is the cache stage's hit path: key, lookup, freshness and
// prefetch checks, the answer rendered for the current second (shared by
// every hit in that second). The server's own work (parse, relay, pack) is
// in internal/server's benchmarks.
func BenchmarkHit(b *testing.B) {
	c := New(Options{Size: 10000, MaxTTL: time.Hour, StaleMaxAge: time.Hour, Prefetch: true})
	defer c.Close()
	s := c.Stage()
	defer s.Close()
	q := new(dns.Msg).SetQuestion("www.example.com.", dns.TypeA)
	q.SetEdns0(1232, false)
	resp := new(dns.Msg).SetReply(q)
	resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "www.example.com.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.IPv4(192, 0, 2, 1)}}
	st, set := c.state()
	st.put(keyOf(q), prepare(resp, keyOf(q), set.lim, time.Now(), "tls://192.0.2.53:853", query.SourcePool))
	next := query.HandlerFunc(func(context.Context, *query.Request) (*dns.Msg, error) {
		b.Fatal("a hit went to the route")
		return nil, nil
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := &query.Request{Msg: q, Deadline: time.Now().Add(time.Hour), Event: &query.Event{}}
		for pb.Next() {
			m, err := s.Answer(context.Background(), r, next)
			if err != nil || len(m.Answer) != 1 {
				b.Fatal("no hit")
			}
		}
	})
}

// BenchmarkEntryMemory reports the live heap per cached entry (one A record,
// names like a household's), measured after a collection: what
// dns.cache_size entries cost beyond the process's base. The RSS an
// operator sees is higher by the collector's headroom (GOGC).
func BenchmarkEntryMemory(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				c := New(Options{Size: n, MaxTTL: time.Hour, StaleMaxAge: time.Hour})
				st, set := c.state()
				for i := range n {
					name := "host" + strconv.Itoa(i) + ".example.com."
					q := new(dns.Msg).SetQuestion(name, dns.TypeA)
					q.SetEdns0(1232, false)
					resp := new(dns.Msg).SetReply(q)
					resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.IPv4(192, 0, 2, 1).To4()}}
					k := keyOf(q)
					st.put(k, prepare(resp, k, set.lim, time.Now(), "tls://192.0.2.53:853", query.SourcePool))
				}
				st.c.CleanUp()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "bytes/entry")
				runtime.KeepAlive(c)
				c.Close()
			}
		})
	}
}

// BenchmarkAnswerWire is the cache's side of the UDP wire shortcut: the
// lookup by the name in the reader's buffer, freshness, the template
// written, the event set. It must not allocate.
func BenchmarkAnswerWire(b *testing.B) {
	c := New(Options{Size: 10000, MaxTTL: time.Hour, StaleMaxAge: time.Hour, Prefetch: true})
	defer c.Close()
	s := c.Stage()
	defer s.Close()
	const name = "www.example.com."
	q := new(dns.Msg).SetQuestion(name, dns.TypeA)
	next := query.HandlerFunc(func(_ context.Context, r *query.Request) (*dns.Msg, error) {
		m := new(dns.Msg).SetReply(r.Msg)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 3600}, A: net.IPv4(192, 0, 2, 1)}}
		return m, nil
	})
	for range 2 { // a miss, then a hit that keeps the template
		if _, err := s.Answer(context.Background(), &query.Request{Msg: q, Deadline: time.Now().Add(time.Hour), Event: &query.Event{}, Wire: plainWire{}}, next); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		buf := []byte(name)
		dst := make([]byte, 0, 512)
		var ev query.Event
		for pb.Next() {
			ev.Time = time.Now()
			out, ok := s.AnswerWire(dst, query.WireQuery{Name: buf, Qtype: dns.TypeA, Qclass: dns.ClassINET, ID: 1}, &ev, nil)
			if !ok || len(out) == 0 {
				b.Fatal("no wire hit")
			}
		}
	})
}
