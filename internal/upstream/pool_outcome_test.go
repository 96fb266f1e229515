package upstream

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// Outcomes and bookkeeping: cancellation, budget counting, rcodes,
// construction, snapshot and shutdown.

// 8. A client that goes away gets cancellation: nothing is counted as
// budget exhaustion and no upstream is blamed.
func TestPool_externalCancellationMutatesNothing(t *testing.T) {
	check := func(t *testing.T, p *Pool, err error, up string) {
		t.Helper()
		if poolTestKind(err) != KindCanceled || !errors.Is(err, ErrCancellation) {
			t.Fatalf("err = %v, want cancellation", err)
		}
		if up != "" {
			t.Errorf("attributed %q, want none", up)
		}
		s := p.Snapshot()
		if s.BudgetExhausted != 0 {
			t.Errorf("budget exhausted = %d, want 0", s.BudgetExhausted)
		}
		for i, u := range s.Upstreams {
			if u.Failures != 0 || u.Successes != 0 || u.InBackoff || p.entries[i].health.fails.Load() != 0 {
				t.Errorf("entry %d health changed: %+v", i, u)
			}
		}
	}
	t.Run("during the attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: poolTestStall}, &fakeClient{onExchange: poolTestAnswer})
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, up, err := p.Resolve(ctx, poolTestQuery("a.example."))
			check(t, p, err, up)
			poolTestAllFree(t, p)
		})
	})
	t.Run("while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: poolTestAnswer})
			free := poolTestHold(t, p, 0, DefaultSlots)
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(100*time.Millisecond, cancel)
			_, up, err := p.Resolve(ctx, poolTestQuery("a.example."))
			check(t, p, err, up)
			if q := p.Snapshot().Upstreams[0].QueuedTotal; q != 1 {
				t.Errorf("queued = %d: a cancelled wait still counts once", q)
			}
			for range DefaultSlots {
				free()
			}
			poolTestAllFree(t, p)
		})
	})
	t.Run("already gone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeClient{onExchange: poolTestAnswer}
			p := poolTestNew(t, poolTestShipped, f)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, up, err := p.Resolve(ctx, poolTestQuery("a.example."))
			check(t, p, err, up)
			if f.live.Load() != 0 || p.Snapshot().Upstreams[0].AttemptLatency.Count != 0 {
				t.Error("an upstream was asked on behalf of a client already gone")
			}
		})
	})
	t.Run("parent deadline we do not own", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: poolTestStall})
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, up, err := p.Resolve(ctx, poolTestQuery("a.example."))
			check(t, p, err, up)
		})
	})
}

// 9. budget_exhausted_total counts queries, once each, whichever way their
// budget ran out; other endings do not count.
func TestPool_budgetExhaustedCountsOncePerQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := Options{Attempt: 3 * time.Second, Total: 5 * time.Second}
		slow := &fakeClient{onExchange: poolTestStall}
		slower := &fakeClient{onExchange: poolTestStall}
		p := poolTestNew(t, opts, slow, slower)

		// Ten at once: a full expiry on the first, a truncated one on the second.
		const n = 10
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, _, err := p.Resolve(t.Context(), poolTestQuery("a.example.")); poolTestKind(err) != KindBudgetExhausted {
					t.Errorf("err = %v, want budget exhausted", err)
				}
			})
		}
		wg.Wait()
		if got := p.Snapshot().BudgetExhausted; got != n {
			t.Fatalf("budget exhausted = %d after %d exhausted queries", got, n)
		}

		// One that only queued, one cancelled: +1.
		free0 := poolTestHold(t, p, 0, DefaultSlots)
		free1 := poolTestHold(t, p, 1, DefaultSlots)
		if _, _, err := p.Resolve(t.Context(), poolTestQuery("b.example.")); poolTestKind(err) != KindBudgetExhausted {
			t.Errorf("queued query: err = %v", err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, _, err := p.Resolve(ctx, poolTestQuery("c.example.")); poolTestKind(err) != KindCanceled {
			t.Errorf("cancelled query: err = %v", err)
		}
		if got := p.Snapshot().BudgetExhausted; got != n+1 {
			t.Errorf("budget exhausted = %d, want %d", got, n+1)
		}
		for range DefaultSlots {
			free0()
			free1()
		}
	})
}

// 14. Upstream rcodes (docs/design.md#pool-rcodes): REFUSED and NOTIMP are peer faults that
// fail over; a SERVFAIL with a DNSSEC EDE is the answer; any other SERVFAIL
// fails over, is never held against health, and the last one is returned.
func TestPool_upstreamRcodes(t *testing.T) {
	servfail := func(ede ...uint16) func(context.Context, *dns.Msg) (*dns.Msg, error) {
		return func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
			r := poolTestReply(m, dns.RcodeServerFailure)
			if len(ede) > 0 {
				r.SetEdns0(1232, false)
				opt := r.IsEdns0()
				for _, c := range ede {
					opt.Option = append(opt.Option, &dns.EDNS0_EDE{InfoCode: c})
				}
			}
			return r, nil
		}
	}
	rcode := func(rc int) func(context.Context, *dns.Msg) (*dns.Msg, error) {
		return func(_ context.Context, m *dns.Msg) (*dns.Msg, error) { return poolTestReply(m, rc), nil }
	}
	type want struct {
		rcode         int
		attributed    int // entry position
		standbyCalled bool
		primaryFails  uint64
		standbyFails  uint64
	}
	tests := []struct {
		name             string
		primary, standby func(context.Context, *dns.Msg) (*dns.Msg, error)
		want             want
	}{
		// Failing over is all a refusal does: the probe judges the upstream
		// (TestPool_refusedQueriesLeaveTheUpstreamToTheProbe).
		{"refused fails over", rcode(dns.RcodeRefused), poolTestAnswer,
			want{dns.RcodeSuccess, 1, true, 0, 0}},
		{"notimp fails over", rcode(dns.RcodeNotImplemented), poolTestAnswer,
			want{dns.RcodeSuccess, 1, true, 0, 0}},
		{"nxdomain is an answer", rcode(dns.RcodeNameError), poolTestAnswer,
			want{dns.RcodeNameError, 0, false, 0, 0}},
		{"dnssec servfail is the answer", servfail(dns.ExtendedErrorCodeDNSBogus), poolTestAnswer,
			want{dns.RcodeServerFailure, 0, false, 0, 0}},
		{"dnssec servfail among other edes", servfail(dns.ExtendedErrorCodeNetworkError, dns.ExtendedErrorCodeNSECMissing), poolTestAnswer,
			want{dns.RcodeServerFailure, 0, false, 0, 0}},
		{"plain servfail fails over", servfail(), poolTestAnswer,
			want{dns.RcodeSuccess, 1, true, 0, 0}},
		{"non-dnssec ede servfail fails over", servfail(dns.ExtendedErrorCodeDNSSECIndeterminate), poolTestAnswer,
			want{dns.RcodeSuccess, 1, true, 0, 0}},
		{"last servfail is returned", servfail(), servfail(),
			want{dns.RcodeServerFailure, 1, true, 0, 0}},
		{"servfail kept over a later peer fault", servfail(), poolTestRefuse,
			want{dns.RcodeServerFailure, 0, true, 0, 1}},
	}
	for code := dns.ExtendedErrorCodeDNSBogus; code <= dns.ExtendedErrorCodeNSECMissing; code++ {
		tests = append(tests, struct {
			name             string
			primary, standby func(context.Context, *dns.Msg) (*dns.Msg, error)
			want             want
		}{"dnssec code " + dns.ExtendedErrorCodeToString[code], servfail(code), poolTestAnswer,
			want{dns.RcodeServerFailure, 0, false, 0, 0}})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				primary := &fakeClient{onExchange: tt.primary}
				standby := &fakeClient{onExchange: tt.standby}
				p := poolTestNew(t, poolTestShipped, primary, standby)
				resp, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
				if err != nil {
					t.Fatalf("err = %v, want an answer", err)
				}
				if resp.Rcode != tt.want.rcode {
					t.Errorf("rcode = %s, want %s", dns.RcodeToString[resp.Rcode], dns.RcodeToString[tt.want.rcode])
				}
				if up != poolTestURL(tt.want.attributed) {
					t.Errorf("attributed %q, want entry %d", up, tt.want.attributed)
				}
				if got := standby.live.Load() > 0; got != tt.want.standbyCalled {
					t.Errorf("standby called = %v, want %v", got, tt.want.standbyCalled)
				}
				s := p.Snapshot()
				if s.Upstreams[0].Failures != tt.want.primaryFails || s.Upstreams[1].Failures != tt.want.standbyFails {
					t.Errorf("failures = %d/%d, want %d/%d", s.Upstreams[0].Failures, s.Upstreams[1].Failures,
						tt.want.primaryFails, tt.want.standbyFails)
				}
			})
		})
	}
}

// A SERVFAIL that fails over does not wait for the last-resort pass: an
// upstream in backoff is not asked to better a serving upstream's answer.
func TestPool_servfailSkipsTheLastResortPass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
			return poolTestReply(m, dns.RcodeServerFailure), nil
		}}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, primary, standby)
		poolTestBackoff(p, 1)
		resp, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if err != nil || resp.Rcode != dns.RcodeServerFailure || up != poolTestURL(0) {
			t.Fatalf("Resolve = %v, %q, %v; want the primary's SERVFAIL", resp, up, err)
		}
		if standby.live.Load() != 0 {
			t.Error("the standby in backoff was asked")
		}
	})
}

// Resolve hands each attempt the caller's query itself, uncopied: a Client
// leaves it as it was (TestClients_leaveTheQueryAsItWas checks the
// transports).
func TestPool_attemptsGetTheCallersQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []*dns.Msg
		refuse := func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
			seen = append(seen, m)
			return nil, poolTestRefusedErr
		}
		p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: refuse}, &fakeClient{onExchange: refuse})
		q := poolTestQuery("a.example.")
		_, _, _ = p.Resolve(t.Context(), q)
		if len(seen) != 2 || seen[0] != q || seen[1] != q {
			t.Errorf("attempts saw %p, want the caller's %p twice", seen, q)
		}
	})
}

// A local resource error blames no upstream and ends the query.
func TestPool_localResourceBlamesNoUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		noFD := func(context.Context, *dns.Msg) (*dns.Msg, error) {
			return nil, &AttemptError{Kind: KindNoResources, Err: errors.New("socket: too many open files")}
		}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: noFD}, standby)
		_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if !errors.Is(err, ErrLocalResource) || up != "" {
			t.Fatalf("Resolve = %q, %v; want a local resource error naming none", up, err)
		}
		if s := p.Snapshot(); s.Upstreams[0].Failures != 0 || standby.live.Load() != 0 {
			t.Errorf("failures %d, standby called %d", s.Upstreams[0].Failures, standby.live.Load())
		}
	})
}

func TestNew(t *testing.T) {
	f := &fakeClient{onExchange: poolTestAnswer}
	ep, _ := ParseEndpoint("tls://192.0.2.1", "", "")
	if _, err := New(poolTestShipped, nil); err == nil {
		t.Error("New accepted no members")
	}
	many := make([]Member, MaxMembers+1)
	for i := range many {
		many[i] = Member{Endpoint: ep, Client: f}
	}
	if _, err := New(poolTestShipped, many); err == nil {
		t.Errorf("New accepted %d members", len(many))
	}
	if p, err := New(poolTestShipped, many[:MaxMembers]); err != nil {
		t.Errorf("New(%d members) = %v", MaxMembers, err)
	} else {
		p.Close()
	}
	if _, err := New(Options{Total: time.Second}, many[:1]); err == nil {
		t.Error("New accepted a zero attempt budget")
	}
	if _, err := New(poolTestShipped, []Member{{Endpoint: ep}}); err == nil {
		t.Error("New accepted a member without a client")
	}
	p, err := New(Options{Attempt: time.Second, Total: time.Second, Slots: 1}, many[:1])
	if err != nil || p.Snapshot().Upstreams[0].Slots != 1 {
		t.Errorf("Slots: 1 not honoured: %v", err)
	}
	p.Close()
}

// Entries are sorted by priority, stably; Index keeps the member's position.
func TestNew_sortsByPriorityStably(t *testing.T) {
	var members []Member
	for i, prio := range []int{1, 0, 1, 0, -5} {
		ep, _ := ParseEndpoint(poolTestURL(i), "", "")
		members = append(members, Member{Endpoint: ep, Client: &fakeClient{onExchange: poolTestAnswer}, Priority: prio})
	}
	p, err := New(poolTestShipped, members)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var got []int
	for _, u := range p.Snapshot().Upstreams {
		got = append(got, u.Index)
		if u.URL != poolTestURL(u.Index) || u.Slots != DefaultSlots {
			t.Errorf("entry %d: url %q slots %d", u.Index, u.URL, u.Slots)
		}
	}
	if want := []int{4, 1, 3, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
}

// Close stops the probers, waits for them and closes every client, once.
func TestPool_closeStopsProbesAndClosesClients(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &fakeClient{onExchange: poolTestStall}
		b := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, a, b)
		p.Start()
		synctest.Wait() // a's start-up probe is in flight
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		if !a.closed.Load() || !b.closed.Load() {
			t.Error("a client was not closed")
		}
		if err := p.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		p.Start() // after Close: starts nothing (the bubble would not end)
	})
}

// The snapshot reads the DoT client's reuse recoveries and every attempt's
// latency.
func TestPool_snapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &poolTestRecoverer{fakeClient{onExchange: poolTestAfter(30*time.Millisecond, poolTestAnswer)}}
		ep, _ := ParseEndpoint(poolTestURL(0), "", "")
		p, err := New(poolTestShipped, []Member{{Endpoint: ep, Client: r}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for range 3 {
			if _, _, err := p.Resolve(t.Context(), poolTestQuery("a.example.")); err != nil {
				t.Fatal(err)
			}
		}
		s := p.Snapshot().Upstreams[0]
		if s.ReuseRecoveries != 7 {
			t.Errorf("reuse recoveries = %d, want 7", s.ReuseRecoveries)
		}
		if s.AttemptLatency.Count != 3 || s.AttemptLatency.Buckets[0.05] != 3 || s.AttemptLatency.Buckets[0.025] != 0 {
			t.Errorf("latency = %+v, want 3 attempts of 30ms", s.AttemptLatency)
		}
		if s.Successes != 3 || s.InFlight != 0 {
			t.Errorf("successes %d, in flight %d", s.Successes, s.InFlight)
		}
	})
}

type poolTestRecoverer struct{ fakeClient }

func (*poolTestRecoverer) ReuseRecoveries() uint64 { return 7 }
