package cache

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// TestPrefetch_boundedInFlight: hits on many entries near expiry at once,
// with the upstream holding every exchange, start at most maxPrefetches
// upstream exchanges; the other hits still answer from the cache and are not
// counted as prefetches.
func TestPrefetch_boundedInFlight(t *testing.T) {
	base := time.Now()
	var off atomic.Int64
	c := New(Options{Size: 1000, MaxTTL: time.Hour, StaleMaxAge: time.Hour, Prefetch: true,
		Now: func() time.Time { return base.Add(time.Duration(off.Load())) }})
	defer c.Close()
	s := c.Stage()
	const names = 200
	queries := make([]*dns.Msg, names)
	st, set := c.state()
	for i := range queries {
		q := new(dns.Msg).SetQuestion(fmt.Sprintf("n%d.example.", i), dns.TypeA)
		resp := new(dns.Msg).SetReply(q)
		resp.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 100}, A: net.IPv4(192, 0, 2, 1)}}
		st.put(keyOf(q), prepare(resp, keyOf(q), set.lim, base, "tls://192.0.2.53:853", query.SourcePool))
		queries[i] = q
	}
	off.Store(int64(95 * time.Second)) // the last tenth of every entry's TTL

	var calls atomic.Int64
	started := make(chan struct{}, names)
	release := make(chan struct{})
	next := query.HandlerFunc(func(ctx context.Context, r *query.Request) (*dns.Msg, error) {
		calls.Add(1)
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	})
	for _, q := range queries {
		r := &query.Request{Msg: q, Deadline: time.Now().Add(time.Minute), Event: &query.Event{}}
		m, err := s.Answer(context.Background(), r, next)
		if err != nil || len(m.Answer) != 1 || r.Event.Cache != query.CacheHit {
			t.Fatalf("%s: %v, %v (cache %q); want a hit", q.Question[0].Name, m, err, r.Event.Cache)
		}
	}
	for range maxPrefetches {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d prefetches started within 10 s, want %d", calls.Load(), maxPrefetches)
		}
	}
	close(release)
	s.Close() // waits for every exchange the stage started
	if n, p := calls.Load(), c.Snapshot().Prefetches; n != maxPrefetches || p != maxPrefetches {
		t.Errorf("%d hits near expiry started %d upstream exchanges (%d prefetches counted), want %d",
			names, n, p, maxPrefetches)
	}
}
