package cache_test

import (
	"context"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
)

type ctxKey struct{}

// TestCoalescing_lastingLeaderRunsTheExchangeItself: a leader whose context
// ends only with the server (query.Request.Lasting, a UDP query) runs the
// exchange under its own context, on its own goroutine, with no hand-off
// (docs/cache.md "Coalescing and prefetch"); a query that joins it still
// gets the one answer. A leader without Lasting keeps the detached exchange:
// its context is not the exchange's.
func TestCoalescing_lastingLeaderRunsTheExchangeItself(t *testing.T) {
	r := newRig(t)
	unblock := r.holdUpstream(t)
	seen := make(chan any, 4)
	next := query.HandlerFunc(func(ctx context.Context, req *query.Request) (*dns.Msg, error) {
		seen <- ctx.Value(ctxKey{})
		msg, up, err := r.router.pool.Resolve(ctx, req.Msg)
		req.Event.Source, req.Event.Upstream = query.SourcePool, up
		return msg, err
	})
	request := func(name string, lasting bool) *query.Request {
		return &query.Request{Msg: new(dns.Msg).SetQuestion(name, dns.TypeA),
			Deadline: time.Now().Add(r.budget), Event: &query.Event{}, Lasting: lasting}
	}
	type result struct {
		msg *dns.Msg
		err error
	}
	own := context.WithValue(context.Background(), ctxKey{}, "the leader's")

	leader := make(chan result, 1)
	go func() {
		msg, err := r.stage.Answer(own, request("lasting.example.", true), next)
		leader <- result{msg, err}
	}()
	testutil.WaitFor(t, "the exchange to reach the upstream", 10*time.Second, func() bool { return r.up.asked("lasting.example.") == 1 })
	if v := <-seen; v != "the leader's" {
		t.Fatalf("the exchange ran under a context carrying %v, want the leader's own", v)
	}
	follower := make(chan result, 1)
	go func() {
		msg, err := r.stage.Answer(context.Background(), request("lasting.example.", true), next)
		follower <- result{msg, err}
	}()
	testutil.WaitFor(t, "the second query to join", 10*time.Second, func() bool { return r.cache.Snapshot().Coalesced == 1 })
	unblock()
	for _, c := range []chan result{leader, follower} {
		select {
		case res := <-c:
			if res.err != nil || res.msg == nil || len(res.msg.Answer) != 1 {
				t.Fatalf("a waiter: %v, %v; want the shared answer", res.msg, res.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter got nothing within 10 s of the upstream's release")
		}
	}
	if n := r.up.asked("lasting.example."); n != 1 {
		t.Errorf("upstream asked %d times, want 1", n)
	}

	// Not lasting (TCP, DoT, DoH): the exchange is the stage's, detached.
	if _, err := r.stage.Answer(own, request("detached.example.", false), next); err != nil {
		t.Fatal(err)
	}
	if v := <-seen; v != nil {
		t.Errorf("a detached exchange ran under a context carrying %v, want the stage's own", v)
	}
}

// TestCache_storingStartsNoGoroutine: storing answers runs the store's
// maintenance on the goroutine that stores, not on a goroutine started per
// write (otter's default), which cost a goroutine created and a thread
// woken on every miss (docs/performance.md "The miss path, end to end").
func TestCache_storingStartsNoGoroutine(t *testing.T) {
	c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
	defer c.Close()
	st := c.Stage()
	defer st.Close()
	next := query.HandlerFunc(func(_ context.Context, req *query.Request) (*dns.Msg, error) {
		m := new(dns.Msg).SetReply(req.Msg)
		rr, _ := dns.NewRR(req.Msg.Question[0].Name + " 300 IN A 192.0.2.1")
		m.Answer = append(m.Answer, rr)
		req.Event.Source = query.SourcePool
		return m, nil
	})
	ask := func(i int) {
		r := &query.Request{Msg: new(dns.Msg).SetQuestion(dns.Fqdn(time.Duration(i).String()+".n.example"), dns.TypeA),
			Deadline: time.Now().Add(time.Second), Event: &query.Event{}, Lasting: true}
		if _, err := st.Answer(context.Background(), r, next); err != nil {
			t.Fatal(err)
		}
	}
	ask(0) // the stage's first use
	// The runtime starts its GC mark workers (one per P) at the process's
	// first collection: one beginning inside the loop would count them.
	runtime.GC()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	for i := 1; i <= 500; i++ { // past the size: evictions too
		ask(i)
	}
	metrics.Read(s)
	if n := s[0].Value.Uint64() - before; n != 0 {
		t.Errorf("500 misses stored started %d goroutines, want 0", n)
	}
}
