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

// Pool behaviour, numbered as in the issue. Every timing test runs inside a
// synctest bubble: its fake clock makes truncation, expiry and cancellation
// exact, so the assertions are instants, not margins.

// 1. The fast-standby field failure: at the shipped defaults a primary that
// stalls every attempt costs one attempt, and the standby answers.
func TestPool_fastStandbyAtShippedDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: poolTestStall}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, primary, standby)

		for i := range 5 {
			start := time.Now()
			resp, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
			took := time.Since(start)
			if err != nil || resp == nil {
				t.Fatalf("query %d: err = %v, want the standby's answer", i, err)
			}
			if up != poolTestURL(1) {
				t.Errorf("query %d: attributed %q, want the standby", i, up)
			}
			// Until the primary enters backoff each query pays exactly one
			// full attempt on it; after, none.
			want := poolTestShipped.Attempt
			if i >= backoffThreshold {
				want = 0
			}
			if took != want {
				t.Errorf("query %d took %v, want %v", i, took, want)
			}
		}
		s := p.Snapshot()
		if got := primary.live.Load(); got != backoffThreshold {
			t.Errorf("primary saw %d queries, want %d (then backoff)", got, backoffThreshold)
		}
		if s.Upstreams[0].Failures != backoffThreshold || !s.Upstreams[0].InBackoff {
			t.Errorf("primary failures = %d, backoff = %v", s.Upstreams[0].Failures, s.Upstreams[0].InBackoff)
		}
		if s.Upstreams[1].Successes != 5 || s.BudgetExhausted != 0 {
			t.Errorf("standby successes = %d, budget exhausted = %d", s.Upstreams[1].Successes, s.BudgetExhausted)
		}
	})
}

// 2. The saturated-primary field failure: every slot of the primary is held
// by a stalled exchange, the standby is free, and a new query is answered by
// the standby at once instead of queueing behind the primary.
func TestPool_saturatedPrimaryDoesNotQueueWhileStandbyIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
			if m.Question[0].Name == "hold." {
				return poolTestStall(ctx, m)
			}
			return poolTestAnswer(ctx, m)
		}}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, primary, standby)

		var holders []<-chan poolTestResult
		for range DefaultSlots {
			holders = append(holders, poolTestGo(t.Context(), p, "hold."))
		}
		synctest.Wait() // every holder is inside the primary's exchange
		if got := p.Snapshot().Upstreams[0].InFlight; got != DefaultSlots {
			t.Fatalf("primary in flight = %d, want all %d slots", got, DefaultSlots)
		}

		start := time.Now()
		_, up, err := p.Resolve(t.Context(), poolTestQuery("new.example."))
		took := time.Since(start)
		if err != nil || up != poolTestURL(1) {
			t.Fatalf("Resolve = %q, %v; want the standby's answer", up, err)
		}
		if took > 100*time.Millisecond {
			t.Errorf("took %v: the query waited for the saturated primary", took)
		}
		s := p.Snapshot()
		if s.Upstreams[0].QueuedTotal != 0 || s.Upstreams[1].QueuedTotal != 0 {
			t.Errorf("queued = %d/%d, want 0: a try-acquire miss is not queueing",
				s.Upstreams[0].QueuedTotal, s.Upstreams[1].QueuedTotal)
		}
		for _, h := range holders { // they fail over to the standby at 2.5 s
			if r := <-h; r.err != nil {
				t.Errorf("holder: %v", r.err)
			}
		}
		poolTestAllFree(t, p)
	})
}

// 3. Both entries saturated: the query blocks on both and takes the first
// slot to free, which is the standby's here.
func TestPool_waiterTakesTheFirstSlotToFreeOnAnyEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: poolTestAnswer}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, primary, standby)
		free0 := poolTestHold(t, p, 0, DefaultSlots)
		free1 := poolTestHold(t, p, 1, DefaultSlots)

		res := poolTestGo(t.Context(), p, "wait.example.")
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		free1() // one standby slot frees first
		r := <-res
		if r.err != nil || r.upstream != poolTestURL(1) {
			t.Fatalf("Resolve = %q, %v; want the standby", r.upstream, r.err)
		}
		if r.took != 300*time.Millisecond {
			t.Errorf("took %v, want the 300ms until the slot freed", r.took)
		}
		if primary.live.Load() != 0 {
			t.Error("the saturated primary was attempted")
		}
		s := p.Snapshot()
		if s.Upstreams[1].QueuedTotal != 1 || s.Upstreams[1].QueuedSeconds != 0.3 {
			t.Errorf("standby queued = %d, %vs; want 1, 0.3s", s.Upstreams[1].QueuedTotal, s.Upstreams[1].QueuedSeconds)
		}
		if s.Upstreams[0].QueuedTotal != 0 {
			t.Errorf("primary queued = %d, want 0", s.Upstreams[0].QueuedTotal)
		}
		for range DefaultSlots {
			free0()
		}
		for range DefaultSlots - 1 {
			free1()
		}
		poolTestAllFree(t, p)
	})
}

// 4. A truncated expiry is a censored observation: the second upstream ran
// with 1.5 s of its 2.5 s when the budget ended. Its health is untouched,
// the query is BudgetExhausted, and the attribution stays with the primary,
// the last upstream whose outcome was recorded.
func TestPool_truncatedExpiryIsNotEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: poolTestStall}
		standby := &fakeClient{onExchange: poolTestStall}
		p := poolTestNew(t, Options{Attempt: 2500 * time.Millisecond, Total: 4000 * time.Millisecond}, primary, standby)

		start := time.Now()
		_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if took := time.Since(start); took != 4*time.Second {
			t.Errorf("took %v, want exactly the 4s budget", took)
		}
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("err = %v, want budget exhausted", err)
		}
		qe := poolTestQueryError(t, err)
		if up != poolTestURL(0) || qe.Attributed != poolTestURL(0) {
			t.Errorf("attributed %q / %q, want the primary (last recorded)", up, qe.Attributed)
		}
		if !slices.Equal(qe.Tried, []string{poolTestURL(0), poolTestURL(1)}) {
			t.Errorf("tried = %v", qe.Tried)
		}
		if qe.Budget != 4*time.Second {
			t.Errorf("budget = %v", qe.Budget)
		}
		s := p.Snapshot()
		if s.Upstreams[1].Failures != 0 || p.entries[1].health.fails.Load() != 0 {
			t.Errorf("truncated standby recorded a failure")
		}
		if s.Upstreams[0].Failures != 1 {
			t.Errorf("primary failures = %d, want 1 (full expiry)", s.Upstreams[0].Failures)
		}
		if s.BudgetExhausted != 1 {
			t.Errorf("budget exhausted = %d, want 1", s.BudgetExhausted)
		}
	})
}

// 5. A truncated attempt that fails on its own (connection refused) is
// evidence: the peer answered within the time it had.
func TestPool_truncatedAttemptThatFailsIsEvidence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: poolTestStall}
		standby := &fakeClient{onExchange: poolTestAfter(500*time.Millisecond, poolTestRefuse)}
		p := poolTestNew(t, Options{Attempt: 2500 * time.Millisecond, Total: 4000 * time.Millisecond}, primary, standby)

		start := time.Now()
		_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("took %v, want 2.5s + 0.5s", took)
		}
		if poolTestKind(err) != KindNetwork {
			t.Fatalf("err = %v, want the standby's network error", err)
		}
		qe := poolTestQueryError(t, err)
		if up != poolTestURL(1) || qe.Attributed != poolTestURL(1) {
			t.Errorf("attributed %q / %q, want the standby", up, qe.Attributed)
		}
		s := p.Snapshot()
		if s.Upstreams[1].Failures != 1 || p.entries[1].health.fails.Load() != 1 {
			t.Errorf("standby failures = %d, want 1", s.Upstreams[1].Failures)
		}
		if s.BudgetExhausted != 0 {
			t.Errorf("budget exhausted = %d, want 0", s.BudgetExhausted)
		}
	})
}

// 6. A query that spends its whole budget waiting for a slot is
// BudgetExhausted and names no upstream: nothing ran.
func TestPool_queueOnlyExhaustionNamesNoUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: poolTestAnswer}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, primary, standby)
		free0 := poolTestHold(t, p, 0, DefaultSlots)
		free1 := poolTestHold(t, p, 1, DefaultSlots)

		start := time.Now()
		_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if took := time.Since(start); took != poolTestShipped.Total {
			t.Errorf("took %v, want the whole budget", took)
		}
		if poolTestKind(err) != KindBudgetExhausted {
			t.Fatalf("err = %v, want budget exhausted", err)
		}
		qe := poolTestQueryError(t, err)
		if up != "" || qe.Attributed != "" || len(qe.Tried) != 0 {
			t.Errorf("attributed %q/%q, tried %v: want none", up, qe.Attributed, qe.Tried)
		}
		if primary.live.Load()+standby.live.Load() != 0 {
			t.Error("an upstream was called")
		}
		s := p.Snapshot()
		if s.BudgetExhausted != 1 {
			t.Errorf("budget exhausted = %d, want 1", s.BudgetExhausted)
		}
		if s.Upstreams[0].QueuedTotal != 1 || s.Upstreams[0].QueuedSeconds != 5 {
			t.Errorf("primary queued = %d, %vs; want 1, 5s", s.Upstreams[0].QueuedTotal, s.Upstreams[0].QueuedSeconds)
		}
		for i := range s.Upstreams {
			if s.Upstreams[i].Failures != 0 || s.Upstreams[i].InBackoff {
				t.Errorf("entry %d health changed", i)
			}
		}
		for range DefaultSlots {
			free0()
			free1()
		}
		poolTestAllFree(t, p)
	})
}

// 7. With every entry in backoff the last-resort pass runs, in priority
// order, under the query's one deadline — and, everything being down, it
// gets one probe timeout in all, shared by the entries (docs/design.md#pool-last-resort).
func TestPool_lastResortPassSpendsTheSameDeadline(t *testing.T) {
	t.Run("standby answers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			primary := &fakeClient{onExchange: poolTestStall}
			standby := &fakeClient{onExchange: poolTestAnswer}
			p := poolTestNew(t, poolTestShipped, primary, standby)
			poolTestBackoff(p, 0)
			poolTestBackoff(p, 1)

			start := time.Now()
			_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
			if err != nil || up != poolTestURL(1) {
				t.Fatalf("Resolve = %q, %v; want the standby", up, err)
			}
			if took := time.Since(start); took != probeTimeout/2 {
				t.Errorf("took %v, want the primary's half of one probe timeout first", took)
			}
			if primary.live.Load() != 1 {
				t.Error("the last-resort pass skipped the primary")
			}
			s := p.Snapshot()
			if !s.Upstreams[0].InBackoff || s.Upstreams[1].InBackoff {
				t.Errorf("backoff = %v/%v, want the answering standby back in service",
					s.Upstreams[0].InBackoff, s.Upstreams[1].InBackoff)
			}
		})
	})
	t.Run("both stall", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := Options{Attempt: 3 * time.Second, Total: 5 * time.Second}
			p := poolTestNew(t, opts, &fakeClient{onExchange: poolTestStall}, &fakeClient{onExchange: poolTestStall})
			poolTestBackoff(p, 0)
			poolTestBackoff(p, 1)
			start := time.Now()
			_, _, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
			if took := time.Since(start); took != probeTimeout {
				t.Errorf("took %v, want one probe timeout (%v), not the %v budget", took, probeTimeout, opts.Total)
			}
			if qe := poolTestQueryError(t, err); qe.Kind != KindAttemptExpired || len(qe.Tried) != 2 {
				t.Errorf("err = %v (tried %v), want both tried and an expiry (EDE 23), not the budget", err, qe.Tried)
			}
		})
	})
	t.Run("after the eligible entries", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			primary := &fakeClient{onExchange: poolTestAnswer}
			standby := &fakeClient{onExchange: poolTestRefuse}
			p := poolTestNew(t, poolTestShipped, primary, standby)
			poolTestBackoff(p, 0)
			_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
			if err != nil || up != poolTestURL(0) {
				t.Fatalf("Resolve = %q, %v; want the primary as last resort", up, err)
			}
			if standby.live.Load() != 1 {
				t.Error("the eligible standby was not tried first")
			}
		})
	})
}

// 11. Two stalling upstreams cost at most one total budget, whatever the
// ratio of attempt to total: no attempt outlives the query's deadline.
func TestPool_twoStallsCostAtMostOneBudget(t *testing.T) {
	for _, attempt := range []time.Duration{time.Second, 2500 * time.Millisecond, 4 * time.Second, 5 * time.Second} {
		t.Run(attempt.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				total := 5 * time.Second
				var latest time.Time
				var mu sync.Mutex
				stall := func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
					d, _ := ctx.Deadline()
					mu.Lock()
					if d.After(latest) {
						latest = d
					}
					mu.Unlock()
					return poolTestStall(ctx, m)
				}
				p := poolTestNew(t, Options{Attempt: attempt, Total: total}, &fakeClient{onExchange: stall}, &fakeClient{onExchange: stall})
				start := time.Now()
				_, _, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
				if took := time.Since(start); took > total {
					t.Errorf("took %v, more than one %v budget", took, total)
				}
				if latest.After(start.Add(total)) {
					t.Errorf("an attempt's deadline %v is past the query's", latest.Sub(start))
				}
				if err == nil || Classify(err).Group() == Cancellation {
					t.Errorf("err = %v", err)
				}
			})
		})
	}
}

// An attempt that ends exactly at the deadline ran its full attempt_timeout:
// not truncated, so its expiry is evidence about the peer (docs/design.md#pool-classification).
func TestPool_attemptEndingAtTheDeadlineIsNotTruncated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: poolTestStall}, &fakeClient{onExchange: poolTestStall})
		_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if poolTestKind(err) != KindAttemptExpired || up != poolTestURL(1) {
			t.Errorf("Resolve = %q, %v; want the standby's full attempt expiry", up, err)
		}
		s := p.Snapshot()
		if s.Upstreams[1].Failures != 1 || s.BudgetExhausted != 0 {
			t.Errorf("standby failures = %d, budget exhausted = %d", s.Upstreams[1].Failures, s.BudgetExhausted)
		}
	})
}

// 12. A deadline already gone starts no attempt: the permit goes back, the
// client is not called, and no upstream is named.
func TestPool_deadlineAlreadyGoneStartsNoAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, f)
		e := p.entries[0]
		if !e.sem.TryAcquire(1) {
			t.Fatal("no slot")
		}
		resp, aerr := p.attempt(t.Context(), time.Now(), e, &query{}, poolTestQuery("a.example."), p.attemptTimeout)
		if resp != nil || aerr == nil || aerr.Kind != KindBudgetExhausted || aerr.Upstream != "" {
			t.Fatalf("attempt = %v, %v; want budget exhausted naming no upstream", resp, aerr)
		}
		if f.live.Load() != 0 {
			t.Error("the client was called after the deadline")
		}
		if s := p.Snapshot().Upstreams[0]; s.AttemptLatency.Count != 0 || s.Successes != 0 {
			t.Errorf("an attempt was recorded: %+v", s)
		}
		poolTestAllFree(t, p)
	})
}

// TestPool_exchangeListsEveryUpstream: after a failover that ends in an
// answer, Exchange names both upstreams in order and attributes the answer
// to the one that gave it (docs/design.md#pool-classification: the event lists every upstream
// tried), which Resolve's QueryError could only do on failure.
func TestPool_exchangeListsEveryUpstream(t *testing.T) {
	primary := &fakeClient{onExchange: poolTestRefuse}
	standby := &fakeClient{onExchange: poolTestAnswer}
	p := poolTestNew(t, poolTestShipped, primary, standby)
	res, err := p.Exchange(t.Context(), poolTestQuery("a.example."))
	if err != nil || res.Msg == nil {
		t.Fatalf("err = %v", err)
	}
	if res.Upstream != poolTestURL(1) || !slices.Equal(res.Tried, []string{poolTestURL(0), poolTestURL(1)}) {
		t.Errorf("attributed %q, tried %v; want the standby, after [primary standby]", res.Upstream, res.Tried)
	}
}

// docs/design.md#pool-last-resort at the shipped defaults (2000/4000 ms): with every
// upstream black-holed and already in backoff, each query answers within one
// probe timeout instead of spending its whole budget on the dead; a
// recovering upstream is still asked, and answers.
func TestPool_everythingDownAnswersWithinAboutOneProbeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := Options{Attempt: 2 * time.Second, Total: 4 * time.Second}
		up := make([]*fakeClient, 3)
		for i := range up {
			up[i] = &fakeClient{onExchange: poolTestStall}
		}
		p := poolTestNew(t, opts, up...)
		for i := range up {
			poolTestBackoff(p, i)
		}
		start := time.Now()
		_, _, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if took := time.Since(start); took > probeTimeout {
			t.Errorf("answered after %v, want within one probe timeout (%v)", took, probeTimeout)
		}
		if qe := poolTestQueryError(t, err); len(qe.Tried) != len(up) {
			t.Errorf("tried %v, want every upstream asked once", qe.Tried)
		}
		up[2].onExchange = poolTestAnswer // the last one comes back
		if _, got, err := p.Resolve(t.Context(), poolTestQuery("b.example.")); err != nil || got != poolTestURL(2) {
			t.Errorf("Resolve = %q, %v; want the recovered upstream's answer", got, err)
		}
	})
}
