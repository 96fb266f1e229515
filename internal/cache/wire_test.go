package cache_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
)

func TestTTLDecrementedOnTheWayOut(t *testing.T) {
	r := newRig(t)
	r.up.set(answerA("192.0.2.1", 300))
	resp, ev := r.askA(t, "a.example.")
	if ttlOf(t, resp) != 300 || ev.Source != query.SourcePool || ev.Cache != query.CacheMiss {
		t.Fatalf("first answer TTL %d, source %q, cache %q; want 300 from the pool, a miss", ttlOf(t, resp), ev.Source, ev.Cache)
	}
	r.clock.AdvanceS(100)
	resp, ev = r.askA(t, "A.Example.") // another case is the same name
	if got := ttlOf(t, resp); got != 200 {
		t.Errorf("after 100 s the TTL is %d, want 200", got)
	}
	if ev.Source != query.SourceCache || ev.Cache != query.CacheHit {
		t.Errorf("source %q, cache %q; want cache, hit", ev.Source, ev.Cache)
	}
	if resp.Question[0].Name != "A.Example." {
		t.Errorf("question %q: the client's case is not restored", resp.Question[0].Name)
	}
	if n := r.up.asked("a.example."); n != 1 {
		t.Errorf("upstream asked %d times, want 1", n)
	}
}

func TestNegativeCaching(t *testing.T) {
	t.Run("SOA minimum", func(t *testing.T) {
		r := newRig(t)
		r.up.set(nxdomain(3600, 120)) // RFC 2308 §5: the smaller of the SOA's TTL and MINIMUM
		resp, _ := r.askA(t, "gone.example.")
		if resp.Rcode != dns.RcodeNameError || len(resp.Ns) != 1 || resp.Ns[0].Header().Ttl != 120 {
			t.Fatalf("first answer %v, want NXDOMAIN with the SOA at TTL 120", resp)
		}
		r.clock.AdvanceS(60)
		resp, ev := r.askA(t, "gone.example.")
		if ev.Source != query.SourceCache || resp.Ns[0].Header().Ttl != 60 {
			t.Errorf("at 60 s: source %q, SOA TTL %d; want the cache, 60", ev.Source, resp.Ns[0].Header().Ttl)
		}
		r.clock.AdvanceS(61)
		if _, ev = r.askA(t, "gone.example."); ev.Source != query.SourcePool {
			t.Errorf("at 121 s: source %q, want the pool (expired)", ev.Source)
		}
		if n := r.up.asked("gone.example."); n != 2 {
			t.Errorf("upstream asked %d times, want 2", n)
		}
	})
	t.Run("absurd SOA capped", func(t *testing.T) {
		r := newRig(t)
		r.up.set(nxdomain(2_000_000_000, 2_000_000_000))
		resp, _ := r.askA(t, "gone.example.")
		if got := resp.Ns[0].Header().Ttl; got != 3600 {
			t.Errorf("SOA TTL %d, want capped at 3600", got)
		}
		r.up.set(nxdomain(1<<31+1, 600)) // RFC 2181 §8: the top bit set reads as 0
		r.askA(t, "top.example.")
		r.askA(t, "top.example.")
		if n := r.up.asked("top.example."); n != 2 {
			t.Errorf("an SOA TTL with the top bit set: upstream asked %d times, want 2 (not cached)", n)
		}
	})
	t.Run("NODATA behind a CNAME", func(t *testing.T) {
		// The CNAME lasts an hour, the SOA's MINIMUM 30 s: the entry is the
		// negative answer it is, kept for the smaller (RFC 2308 §6), not for
		// the CNAME's hour as a positive answer would be.
		r := newRig(t)
		r.up.set(nodataBehindCNAME(3600, 600, 30))
		resp, _ := r.askA(t, "alias.example.")
		if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 || len(resp.Ns) != 1 || resp.Ns[0].Header().Ttl != 30 {
			t.Fatalf("first answer %v, want NOERROR, the CNAME and the SOA at TTL 30", resp)
		}
		if got := resp.Answer[0].Header().Ttl; got != 3600 {
			t.Errorf("CNAME TTL %d, want its own 3600", got)
		}
		r.clock.AdvanceS(20)
		if _, ev := r.askA(t, "alias.example."); ev.Source != query.SourceCache {
			t.Errorf("at 20 s: source %q, want the cache", ev.Source)
		}
		r.clock.AdvanceS(11)
		if _, ev := r.askA(t, "alias.example."); ev.Source != query.SourcePool {
			t.Errorf("at 31 s: source %q, want the pool (the negative answer expired)", ev.Source)
		}
		if ex := r.explain("alias.example.", dns.TypeA); len(ex) != 1 || !ex[0].Negative {
			t.Errorf("entry %+v, want one negative entry", ex)
		}
	})
	t.Run("NODATA behind a CNAME shorter than the SOA's", func(t *testing.T) {
		// The CNAME lasts 10 s, the SOA's MINIMUM 300: the entry lasts 10 s,
		// and the SOA counts down with it from the cache.
		r := newRig(t)
		r.up.set(nodataBehindCNAME(10, 600, 300))
		if resp, _ := r.askA(t, "short.example."); len(resp.Ns) != 1 || resp.Ns[0].Header().Ttl != 10 {
			t.Fatalf("first answer %v, want the SOA at the entry's 10 s", resp)
		}
		r.clock.AdvanceS(4)
		resp, ev := r.askA(t, "short.example.")
		if ev.Source != query.SourceCache || len(resp.Answer) != 1 || resp.Answer[0].Header().Ttl != 6 || resp.Ns[0].Header().Ttl != 6 {
			t.Errorf("at 4 s: %v from %q, want the cache with the CNAME and the SOA at 6", resp, ev.Source)
		}
		r.clock.AdvanceS(7)
		if _, ev := r.askA(t, "short.example."); ev.Source != query.SourcePool {
			t.Errorf("at 11 s: source %q, want the pool", ev.Source)
		}
	})
	t.Run("without SOA", func(t *testing.T) {
		r := newRig(t, withOptions(func(o *cache.Options) { o.MinTTL = seconds(600) }))
		r.up.set(nxdomain(0, 0))
		r.askA(t, "nosoa.example.")
		r.clock.AdvanceS(2)
		if _, ev := r.askA(t, "nosoa.example."); ev.Source != query.SourceCache {
			t.Errorf("at 2 s: source %q, want the cache (kept briefly)", ev.Source)
		}
		r.clock.AdvanceS(4) // 6 s: past the 5 s, cache_min_ttl notwithstanding
		if _, ev := r.askA(t, "nosoa.example."); ev.Source != query.SourcePool {
			t.Errorf("at 6 s: source %q, want the pool", ev.Source)
		}
	})
}

func TestNeverCached(t *testing.T) {
	cases := map[string]func(*dns.Msg) *dns.Msg{
		"SERVFAIL": func(q *dns.Msg) *dns.Msg { return new(dns.Msg).SetRcode(q, dns.RcodeServerFailure) },
		"TTL 0":    answerA("192.0.2.1", 0),
		"truncated": func(q *dns.Msg) *dns.Msg {
			m := answerA("192.0.2.1", 300)(q)
			m.Truncated = true
			return m
		},
		"TTL top bit set (RFC 2181 §8)": answerA("192.0.2.1", 1<<31+5),
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			r.up.set(f)
			r.askA(t, "x.example.")
			r.askA(t, "x.example.")
			if n := r.up.asked("x.example."); n != 2 {
				t.Errorf("upstream asked %d times, want 2: the answer must not be cached", n)
			}
		})
	}
}

func TestTTLClamps(t *testing.T) {
	r := newRig(t, withOptions(func(o *cache.Options) { o.MinTTL, o.MaxTTL = seconds(30), seconds(3600) }))
	// Mismatched TTLs in one RRset: RFC 2181 §5.2 reads them as the minimum.
	r.up.set(func(q *dns.Msg) *dns.Msg {
		m := answerA("192.0.2.1", 500)(q)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA,
			Class: dns.ClassINET, Ttl: 200}, A: net.ParseIP("192.0.2.2").To4()})
		return m
	})
	resp, _ := r.askA(t, "mixed.example.")
	for _, rr := range resp.Answer {
		if rr.Header().Ttl != 200 {
			t.Errorf("mismatched RRset: %v, want every record at 200", rr)
		}
	}
	r.up.set(answerA("192.0.2.1", 5))
	if resp, _ := r.askA(t, "short.example."); ttlOf(t, resp) != 30 {
		t.Errorf("TTL 5 went out as %d, want raised to cache_min_ttl 30", ttlOf(t, resp))
	}
	r.up.set(answerA("192.0.2.1", 2_000_000_000))
	if resp, _ := r.askA(t, "long.example."); ttlOf(t, resp) != 3600 {
		t.Errorf("a huge TTL went out as %d, want lowered to cache_max_ttl 3600", ttlOf(t, resp))
	}
	x := r.explain("long.example.", dns.TypeA)
	if len(x) != 1 || x[0].Clamp == "" || x[0].UpstreamTTL != 2_000_000_000 || x[0].TTLS != 3600 {
		t.Errorf("explain: %+v, want the clamp named", x)
	}
}

func TestEvictionKeepsHotNames(t *testing.T) {
	r := newRig(t, withOptions(func(o *cache.Options) { o.Size = 16 }))
	hot := []string{"hot1.example.", "hot2.example.", "hot3.example.", "hot4.example."}
	// 40 one-time names between two asks of a hot name, in a cache of 16:
	// an LRU would lose every hot name every round.
	warm := map[string]int{}
	for i := range 30 {
		if i == 10 { // warm-up over: the hot names have shown they are hot
			for _, h := range hot {
				warm[h] = r.up.asked(h)
			}
		}
		for _, h := range hot {
			r.askA(t, h)
		}
		for j := range 40 {
			r.askA(t, "flood"+itoa(i*40+j)+".example.")
		}
	}
	for _, h := range hot {
		if n := r.up.asked(h); n != warm[h] {
			t.Errorf("%s: upstream asked %d more times after warm-up, want none: a flood of one-time names evicted a hot name", h, n-warm[h])
		}
	}
	// otter applies writes in batches on a goroutine of its own: the bound
	// holds once it has caught up.
	testutil.WaitFor(t, "the bound of 16", 10*time.Second, func() bool { return r.cache.Snapshot().Entries <= 16 })
	if ev := r.cache.Snapshot().Evictions; ev == 0 {
		t.Error("no evictions counted at the bound")
	}
}

func itoa(i int) string {
	return string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
}

func TestDOAndCDAreSeparateEntries(t *testing.T) {
	r := newRig(t)
	r.up.set(func(q *dns.Msg) *dns.Msg {
		m := answerA("192.0.2.1", 300)(q)
		m.AuthenticatedData = true
		if o := q.IsEdns0(); o != nil && o.Do() {
			sig := &dns.RRSIG{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 300},
				TypeCovered: dns.TypeA, Algorithm: dns.ECDSAP256SHA256, Labels: 2, OrigTtl: 300,
				Expiration: 2000000000, Inception: 1000000000, KeyTag: 1, SignerName: "example.", Signature: "AAAA"}
			m.Answer = append(m.Answer, sig)
		}
		return m
	})
	query := func(do, cd bool) *dns.Msg {
		m := new(dns.Msg).SetQuestion("signed.example.", dns.TypeA)
		m.SetEdns0(1232, do)
		m.CheckingDisabled = cd
		return m
	}
	withDO := r.ask(t, query(true, false))
	if len(withDO.Answer) != 2 || !withDO.AuthenticatedData {
		t.Fatalf("DO client: %v, want the RRSIG and AD", withDO)
	}
	plain := r.ask(t, query(false, false))
	for _, rr := range plain.Answer {
		if rr.Header().Rrtype == dns.TypeRRSIG {
			t.Errorf("a DO=0 client got %v", rr)
		}
	}
	if plain.AuthenticatedData {
		t.Error("a DO=0 client got AD")
	}
	r.ask(t, query(false, true))
	r.ask(t, query(false, false))
	r.ask(t, query(true, false))
	if n := r.up.asked("signed.example."); n != 3 {
		t.Errorf("upstream asked %d times, want 3: DO=1, DO=0, CD=1 are three entries", n)
	}
}

func TestCoalescing_50IdenticalQueries(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	r.up.set(func(q *dns.Msg) *dns.Msg {
		<-release // hold the exchange until every client has asked
		return answerA("192.0.2.1", 60)(q)
	})
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			m := new(dns.Msg).SetQuestion("same.example.", dns.TypeA)
			m.Id = uint16(1000 + i)
			c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
			resp, _, err := c.Exchange(m, r.addr)
			switch {
			case err != nil:
				errs <- err.Error()
			case resp.Id != m.Id || len(resp.Answer) != 1:
				errs <- "answer with ID " + itoa(int(resp.Id)) + " for another query"
			}
		})
	}
	testutil.WaitFor(t, "49 queries to join the first", 10*time.Second, func() bool { return r.cache.Snapshot().Coalesced == n-1 })
	close(release)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := r.up.asked("same.example."); got != 1 {
		t.Errorf("upstream asked %d times, want 1", got)
	}
}

// A stub that retransmits (same ID, same socket) while the first exchange
// is still at the upstream joins that exchange rather than starting another.
func TestCoalescing_clientRetransmissionJoinsTheExchange(t *testing.T) {
	r := newRig(t)
	unblock := r.holdUpstream(t)
	conn, err := net.Dial("udp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := new(dns.Msg).SetQuestion("retry.example.", dns.TypeA)
	m.Id = 4242
	wire, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(wire); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the first query to reach the upstream", 10*time.Second, func() bool { return r.up.asked("retry.example.") == 1 })
	if _, err := conn.Write(wire); err != nil { // the stub's retry
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the retransmission to join", 10*time.Second, func() bool { return r.cache.Snapshot().Coalesced == 1 })
	unblock()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1500)
	for i := range 2 {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("answer %d: %v", i+1, err)
		}
		resp := new(dns.Msg)
		if err := resp.Unpack(buf[:n]); err != nil || resp.Id != m.Id || len(resp.Answer) != 1 {
			t.Fatalf("answer %d: %v (%v), want the answer with ID %d", i+1, resp, err, m.Id)
		}
	}
	if n := r.up.asked("retry.example."); n != 1 {
		t.Errorf("upstream asked %d times, want 1", n)
	}
}

// An answer that was on its way when the operator flushed goes to the
// client that asked but is not kept: the next query asks again.
func TestFlush_answerInFlightIsNotKept(t *testing.T) {
	r := newRig(t)
	unblock := r.holdUpstream(t)
	done := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
		resp, _, _ := c.Exchange(new(dns.Msg).SetQuestion("moving.example.", dns.TypeA), r.addr)
		done <- resp
	}()
	testutil.WaitFor(t, "the query to reach the upstream", 10*time.Second, func() bool { return r.up.asked("moving.example.") == 1 })
	r.cache.Flush("example.")
	r.up.set(answerA("192.0.2.2", 60)) // the name moved: why the operator flushed
	unblock()
	if resp := <-done; resp == nil || len(resp.Answer) != 1 {
		t.Fatalf("the query in flight got %v, want its answer", resp)
	}
	r.event(t)
	resp, ev := r.askA(t, "moving.example.")
	if ev.Source != query.SourcePool || len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "192.0.2.2" {
		t.Errorf("after the flush: %v from %q, want 192.0.2.2 from the pool", resp.Answer, ev.Source)
	}
}

// TestCoalescing_waiterThatLeavesCancelsNothing drives the stage directly,
// so the waiter that leaves really does: the leader's context is cancelled
// while the shared exchange is at the upstream, the leader returns, and the
// waiter that stays still gets the answer from the one exchange. Over UDP the
// server never learns that a client gave up, so this needs the stage API.
func TestCoalescing_waiterThatLeavesCancelsNothing(t *testing.T) {
	r := newRig(t)
	unblock := r.holdUpstream(t)
	next := query.HandlerFunc(func(ctx context.Context, req *query.Request) (*dns.Msg, error) {
		msg, up, err := r.router.pool.Resolve(ctx, req.Msg)
		req.Event.Source, req.Event.Upstream = query.SourcePool, up
		return msg, err
	})
	request := func() *query.Request {
		return &query.Request{Msg: new(dns.Msg).SetQuestion("slow.example.", dns.TypeA),
			Deadline: time.Now().Add(r.budget), Event: &query.Event{}}
	}
	type result struct {
		msg *dns.Msg
		err error
	}

	leaving, leave := context.WithCancel(context.Background())
	defer leave()
	leader := make(chan result, 1)
	go func() {
		msg, err := r.stage.Answer(leaving, request(), next)
		leader <- result{msg, err}
	}()
	testutil.WaitFor(t, "the shared exchange to reach the upstream", 10*time.Second, func() bool { return r.up.asked("slow.example.") == 1 })
	staying := make(chan result, 1)
	go func() {
		msg, err := r.stage.Answer(context.Background(), request(), next)
		staying <- result{msg, err}
	}()
	testutil.WaitFor(t, "the second query to join", 10*time.Second, func() bool { return r.cache.Snapshot().Coalesced == 1 })

	leave()
	select {
	case res := <-leader:
		if !errors.Is(res.err, context.Canceled) {
			t.Fatalf("the leaving waiter: %v, %v; want context.Canceled", res.msg, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leaving waiter did not return within 10 s of its context's cancellation")
	}
	unblock()
	select {
	case res := <-staying:
		if res.err != nil || res.msg == nil || len(res.msg.Answer) != 1 {
			t.Fatalf("the staying waiter: %v, %v; want the shared answer", res.msg, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the staying waiter got nothing within 10 s of the upstream's release")
	}
	if n := r.up.asked("slow.example."); n != 1 {
		t.Errorf("upstream asked %d times, want 1", n)
	}
}

func TestServeStale_outageThenRecovery(t *testing.T) {
	r := newRig(t, withBudget(time.Second))
	r.askA(t, "s.example.")
	r.up.set(nil) // the upstream stalls
	r.clock.AdvanceS(61)

	start := time.Now()
	resp, ev := r.askA(t, "s.example.")
	took := time.Since(start)
	ede := edeOf(resp)
	if ede == nil || ede.InfoCode != dns.ExtendedErrorCodeStaleAnswer || ttlOf(t, resp) != 30 || ev.Source != query.SourceStale {
		t.Fatalf("during the outage: %v (source %q), want the stale answer, TTL 30, EDE 3", resp, ev.Source)
	}
	// The stale point: min(1800 ms, budget 1000 ms - 100 ms margin).
	if took < 850*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("stale answer after %v, want at the 900 ms stale point", took)
	}
	testutil.WaitFor(t, "the failed refresh to arm the recheck timer", 10*time.Second, func() bool {
		x := r.explain("s.example.", dns.TypeA)
		return len(x) == 1 && x[0].RetryInS > 0
	})
	r.up.set(answerA("192.0.2.2", 60)) // back, with a new address
	start = time.Now()
	resp, _ = r.askA(t, "s.example.")
	if edeOf(resp) == nil || time.Since(start) > 500*time.Millisecond {
		t.Errorf("within 30 s of a failed refresh: %v after %v, want the stale answer at once", resp, time.Since(start))
	}
	r.clock.AdvanceS(31)
	resp, ev = r.askA(t, "s.example.")
	if edeOf(resp) != nil || ev.Source != query.SourcePool || resp.Answer[0].(*dns.A).A.String() != "192.0.2.2" {
		t.Errorf("after the recheck time: %v (source %q), want the fresh answer", resp, ev.Source)
	}
	if _, ev = r.askA(t, "s.example."); ev.Source != query.SourceCache {
		t.Errorf("next query: source %q, want the refreshed entry", ev.Source)
	}
}

func TestServeStale_pastMaxAgeIsSERVFAIL(t *testing.T) {
	r := newRig(t, withBudget(500*time.Millisecond), withOptions(func(o *cache.Options) { o.StaleMaxAge = seconds(100) }))
	r.askA(t, "old.example.")
	r.up.set(nil)
	r.clock.AdvanceS(60 + 101)
	resp, ev := r.askA(t, "old.example.")
	if resp.Rcode != dns.RcodeServerFailure || ev.Source == query.SourceStale {
		t.Errorf("past stale_max_age: rcode %s, source %q; want SERVFAIL, not stale", dns.RcodeToString[resp.Rcode], ev.Source)
	}
}

func TestPrefetch_nearExpiry(t *testing.T) {
	r := newRig(t)
	r.up.set(answerA("192.0.2.1", 100))
	r.askA(t, "pop.example.")
	r.clock.AdvanceS(50)
	r.askA(t, "pop.example.")
	if n := r.up.asked("pop.example."); n != 1 {
		t.Fatalf("half-way through the TTL the upstream was asked %d times, want 1 (no prefetch yet)", n)
	}
	r.clock.AdvanceS(41) // 9 s left: the last tenth
	if _, ev := r.askA(t, "pop.example."); ev.Source != query.SourceCache {
		t.Errorf("near expiry: source %q, want the cache (the prefetch runs behind)", ev.Source)
	}
	testutil.WaitFor(t, "the prefetch", 10*time.Second, func() bool {
		x := r.explain("pop.example.", dns.TypeA)
		return len(x) == 1 && x[0].AgeS < 5
	})
	if n, p := r.up.asked("pop.example."), r.cache.Snapshot().Prefetches; n != 2 || p != 1 {
		t.Errorf("upstream asked %d times, prefetches %d; want 2 and 1", n, p)
	}
}

func TestZone_routerDownServesStaleAndRecoveryDropsNegatives(t *testing.T) {
	r := newRig(t)
	r.lan.set(func(q *dns.Msg) *dns.Msg {
		if q.Question[0].Name == "newpc.lan." {
			m := nxdomain(300, 300)(q)
			m.Ns[0].Header().Name = "lan."
			return m
		}
		return answerA("192.168.1.10", 10)(q)
	})
	r.askA(t, "nas.lan.")
	if resp, _ := r.askA(t, "newpc.lan."); resp.Rcode != dns.RcodeNameError {
		t.Fatalf("newpc.lan: %v, want NXDOMAIN before it joined", resp)
	}
	r.lan.set(nil) // the router reboots
	r.clock.AdvanceS(11)
	resp, ev := r.askA(t, "nas.lan.")
	if edeOf(resp) == nil || ev.Source != query.SourceStale || len(resp.Answer) != 1 {
		t.Fatalf("router down: %v (source %q), want the last good answer, stale", resp, ev.Source)
	}
	// Back, and now it knows newpc; the cached NXDOMAIN (60 s cap) is still fresh.
	r.lan.set(answerA("192.168.1.20", 10))
	r.clock.AdvanceS(31) // past the failure-recheck time
	resp, ev = r.askA(t, "nas.lan.")
	if edeOf(resp) != nil || ev.Source != "zone:lan" {
		t.Fatalf("router back: %v (source %q), want a fresh zone answer", resp, ev.Source)
	}
	resp, ev = r.askA(t, "newpc.lan.")
	if resp.Rcode != dns.RcodeSuccess || ev.Source != "zone:lan" {
		t.Errorf("newpc.lan after recovery: %s from %q, want NOERROR from the zone: its negative entry must be gone",
			dns.RcodeToString[resp.Rcode], ev.Source)
	}
}

func TestWarmRestart_firstQueryFromCacheFile(t *testing.T) {
	file := t.TempDir() + "/cache"
	r := newRig(t, withOptions(func(o *cache.Options) { o.File = file }))
	r.askA(t, "warm.example.")
	r.stop(t) // saves the file
	r.start(t)
	resp, ev := r.askA(t, "warm.example.")
	if ev.Source != query.SourceCache || len(resp.Answer) != 1 {
		t.Errorf("after restart: source %q, want the cache", ev.Source)
	}
	if n := r.up.asked("warm.example."); n != 1 {
		t.Errorf("upstream asked %d times, want 1", n)
	}
}

// validating answers as a validating resolver does (RFC 6840 §5.7–5.8): AD
// only to a query that set AD or DO.
func validating(q *dns.Msg) *dns.Msg {
	m := answerA("192.0.2.1", 300)(q)
	o := q.IsEdns0()
	m.AuthenticatedData = q.AuthenticatedData || o != nil && o.Do()
	return m
}

// One entry serves every client, and the reply decides AD per client (RFC
// 6840 §5.8): a client that set AD gets it without DO — on its own miss,
// and on a hit of the entry a client without AD or DO filled — and a
// client that set neither never does.
func TestAD_decidedPerClientFromOneEntry(t *testing.T) {
	r := newRig(t)
	r.up.set(validating)
	ask := func(name string, ad bool) *dns.Msg {
		m := new(dns.Msg).SetQuestion(name, dns.TypeA)
		m.AuthenticatedData = ad
		return r.ask(t, m)
	}
	if resp := ask("first.example.", true); !resp.AuthenticatedData {
		t.Error("an AD=1 DO=0 client's miss came back without AD")
	}
	if resp := ask("first.example.", true); !resp.AuthenticatedData {
		t.Error("an AD=1 DO=0 client's hit came back without AD")
	}
	if resp := ask("plain.example.", false); resp.AuthenticatedData {
		t.Error("a client with neither AD nor DO got AD")
	}
	for i := range 3 { // the general path, then the fast path's template
		if resp := ask("plain.example.", true); !resp.AuthenticatedData {
			t.Errorf("hit %d: an AD=1 client got no AD from the entry a plain client filled", i+1)
		}
		if resp := ask("plain.example.", false); resp.AuthenticatedData {
			t.Errorf("hit %d: a client with neither AD nor DO got AD", i+1)
		}
	}
	if n := r.up.asked("plain.example."); n != 1 {
		t.Errorf("upstream asked %d times, want 1: AD is not part of the key", n)
	}
}

// An explicit ANY without DO gets the RRSIG and NSEC records at the name
// (RFC 3225 §3), on the miss and from the cache.
func TestANY_keepsSignaturesWithoutDO(t *testing.T) {
	r := newRig(t)
	r.up.set(func(q *dns.Msg) *dns.Msg {
		name := q.Question[0].Name
		m := answerA("192.0.2.1", 300)(q)
		hdr := func(t uint16) dns.RR_Header {
			return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 300}
		}
		m.Answer[0].Header().Name = name
		m.Answer = append(m.Answer,
			&dns.RRSIG{Hdr: hdr(dns.TypeRRSIG), TypeCovered: dns.TypeA, Algorithm: dns.ECDSAP256SHA256, Labels: 2, OrigTtl: 300,
				Expiration: 2000000000, Inception: 1000000000, KeyTag: 1, SignerName: "example.", Signature: "AAAA"},
			&dns.NSEC{Hdr: hdr(dns.TypeNSEC), NextDomain: "z.example.", TypeBitMap: []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}})
		return m
	})
	for _, what := range []string{"miss", "hit"} {
		resp := r.ask(t, new(dns.Msg).SetQuestion("any.example.", dns.TypeANY))
		var types []string
		for _, rr := range resp.Answer {
			types = append(types, dns.TypeToString[rr.Header().Rrtype])
		}
		if len(types) != 3 {
			t.Errorf("%s: ANY without DO answered %v, want A, RRSIG and NSEC", what, types)
		}
	}
}

// TestServeStale_oversizedRefreshDropsTheOldAnswer: an expired entry's
// refresh brings an answer too heavy to cache (200 A records, over 1/64 of
// a 1 MiB budget). The client gets it; the old answer, which it replaces,
// is dropped rather than kept to be served stale later: when the upstream
// then stalls, the name fails rather than going back to the superseded
// address.
func TestServeStale_oversizedRefreshDropsTheOldAnswer(t *testing.T) {
	r := newRig(t, withBudget(time.Second), withOptions(func(o *cache.Options) { o.MaxBytes = 1 << 20 }))
	r.askA(t, "grow.example.")
	r.up.set(func(q *dns.Msg) *dns.Msg {
		m := answerA("192.0.2.2", 60)(q)
		for i := range 199 {
			m.Answer = append(m.Answer, &dns.A{Hdr: *m.Answer[0].Header(), A: net.IPv4(10, 0, byte(i>>8), byte(i)).To4()})
		}
		return m
	})
	r.clock.AdvanceS(61)
	if _, ev := r.askA(t, "grow.example."); ev.Source != query.SourcePool {
		t.Fatalf("refresh: source %q, want the pool", ev.Source)
	}
	testutil.WaitFor(t, "the heavy answer counted as oversized", 10*time.Second, func() bool { return r.cache.Snapshot().Oversized == 1 })
	r.up.set(nil) // the upstream stalls
	if resp, ev := r.askA(t, "grow.example."); ev.Source == query.SourceStale {
		t.Errorf("after an oversized refresh: %v (source %q), the superseded answer served stale", resp, ev.Source)
	}
}
