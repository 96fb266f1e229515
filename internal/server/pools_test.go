package server

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
)

// kidsStage puts 127.0.0.2 in group "kids", which has a pool of its own,
// as the filter stage does (query.Pooler), and passes everything on.
type kidsStage struct{}

var kidsAddr = netip.MustParseAddr("127.0.0.2")

func (kidsStage) PoolOf(ev *query.Event) string {
	if ev.Client == kidsAddr {
		return "kids"
	}
	return ""
}

func (k kidsStage) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	r.Event.Pool = k.PoolOf(r.Event)
	return next.Answer(ctx, r)
}

func (kidsStage) Passes(*query.Event, []string) bool { return true }

// pools is a PoolRouter over a main pool and the group "kids"'s pool.
type pools struct{ main, kids Resolver }

func (p pools) Route(string) (Resolver, string) { return p.main, query.SourcePool }

func (p pools) RouteIn(_, pool string) (Resolver, string) {
	if pool == "kids" {
		return p.kids, query.SourcePool
	}
	return p.main, query.SourcePool
}

// TestPools_cacheNeverCrossesPools: the same question from a client of the
// main pool and from one of the kids' pool gets each pool's own answer,
// through the general path and then the UDP fast path (cache/hit.go,
// fastpath.go): the cache keys answers by pool (docs/filter.md
// "Per-group upstreams"). Blocky's cache hands one group's answer to
// another; removing the pool from the cache key fails this.
func TestPools_cacheNeverCrossesPools(t *testing.T) {
	var mainAsked, kidsAsked atomic.Int64
	main := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		mainAsked.Add(1)
		return reply(q, aRecord(q.Question[0].Name, "198.51.100.1")), "tls://main", nil
	})
	kids := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		kidsAsked.Add(1)
		return reply(q, aRecord(q.Question[0].Name, "203.0.113.1")), "tls://family", nil
	})
	c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	s := startServer(t, &State{Router: pools{main, kids}, Allow: loopback, Stages: []query.Stage{kidsStage{}, st}})

	ask := func(src string) (string, bool) {
		t.Helper()
		before := s.stats.fastAnswers.Load()
		conn := dialUDPFrom(t, src, udpAddr(s))
		if _, err := conn.Write(mustPack(t, newQuery("video.example.", dns.TypeA))); err != nil {
			t.Fatal(err)
		}
		m := readUDPMsg(t, conn)
		if len(m.Answer) != 1 {
			t.Fatalf("from %s: %v", src, m)
		}
		return m.Answer[0].(*dns.A).A.String(), s.stats.fastAnswers.Load() > before
	}
	// Alternate so each pool's entry is there before the other's is asked
	// for; from the third round on each is a fast-path hit, and the rounds
	// go on (bounded) until both were seen as one: the counter is raised
	// beside the answer's write, not before it.
	fast := map[string]bool{}
	for round := 0; round < 3 || (round < 20 && !(fast["127.0.0.1"] && fast["127.0.0.2"])); round++ {
		for src, want := range map[string]string{"127.0.0.1": "198.51.100.1", "127.0.0.2": "203.0.113.1"} {
			got, f := ask(src)
			if got != want {
				t.Fatalf("client %s got %s, want %s (its own pool's answer)", src, got, want)
			}
			fast[src] = fast[src] || f
		}
	}
	if !fast["127.0.0.1"] || !fast["127.0.0.2"] {
		t.Errorf("fast-path answers by client %v: want both clients answered from the wire at least once", fast)
	}
	if mainAsked.Load() != 1 || kidsAsked.Load() != 1 {
		t.Errorf("main pool asked %d, kids' pool %d times; want 1 each (then cache hits of its own)", mainAsked.Load(), kidsAsked.Load())
	}
}

// rebindGuard refuses every answer with an A record of 10.0.0.1, as
// internal/rebind does for internal addresses.
type rebindGuard struct{}

func (rebindGuard) Check(q, resp *dns.Msg) (*dns.Msg, bool) {
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok && a.A.String() == "10.0.0.1" {
			return new(dns.Msg).SetRcode(q, dns.RcodeServerFailure), true
		}
	}
	return nil, false
}

// TestRoute_guardChecksThePoolOnly: a pool's answer the guard refuses is
// replaced, the event says "rebinding" and keeps the upstream; a forward
// zone's identical answer passes (the LAN's own names are the zone's).
func TestRoute_guardChecksThePoolOnly(t *testing.T) {
	internal := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return reply(q, aRecord(q.Question[0].Name, "10.0.0.1")), "tls://up", nil
	})
	router := routerFunc(func(qname string) (Resolver, string) {
		if qname == "nas.lan." {
			return internal, "zone:lan"
		}
		return internal, query.SourcePool
	})
	sink := &sinkRecorder{}
	s := startServer(t, &State{Router: router, Allow: loopback, Guard: rebindGuard{}, Sinks: []query.Sink{sink}})
	if m := exchange(t, "udp", udpAddr(s), newQuery("evil.example.", dns.TypeA)); m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
		t.Errorf("pool answer with an internal address: %v", m)
	}
	if m := exchange(t, "udp", udpAddr(s), newQuery("nas.lan.", dns.TypeA)); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Errorf("forward zone's answer: %v", m)
	}
	testutil.WaitFor(t, "both events", 2*time.Second, func() bool { return len(sink.all()) == 2 })
	ev := sink.all()[0]
	if ev.Source != query.SourceRebinding || ev.Upstream != "tls://up" {
		t.Errorf("refused event: source %q upstream %q, want rebinding and the upstream that answered", ev.Source, ev.Upstream)
	}
}
