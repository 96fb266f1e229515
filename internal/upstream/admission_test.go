package upstream

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// 10a. A cancelled waiter holds nothing, and a peer waiter still gets the
// slot when it frees.
func TestAdmission_cancelledWaiterHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, Options{Attempt: time.Second, Total: 5 * time.Second, Slots: 1}, f)
		free := poolTestHold(t, p, 0, 1)

		ctx, cancel := context.WithCancel(t.Context())
		gone := poolTestGo(ctx, p, "gone.example.")
		peer := poolTestGo(t.Context(), p, "peer.example.")
		synctest.Wait() // both are waiting
		cancel()
		if r := <-gone; poolTestKind(r.err) != KindCanceled {
			t.Fatalf("cancelled waiter: %v", r.err)
		}
		time.Sleep(100 * time.Millisecond)
		free()
		r := <-peer
		if r.err != nil || r.took != 100*time.Millisecond {
			t.Fatalf("peer waiter = %v after %v; want an answer when the slot freed", r.err, r.took)
		}
		if f.live.Load() != 1 {
			t.Errorf("client called %d times, want once (the peer)", f.live.Load())
		}
		poolTestAllFree(t, p)
	})
}

// 10b. An expiry and a slot release in the same instant: whichever wins,
// the waiter ends BudgetExhausted without calling the upstream, and the
// permit count is exact afterwards.
func TestAdmission_expiryAcquisitionTieLeavesCountExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeClient{onExchange: poolTestAnswer}
		const total = time.Second
		p := poolTestNew(t, Options{Attempt: total, Total: total, Slots: 1}, f)
		for round := range 200 {
			free := poolTestHold(t, p, 0, 1)
			time.AfterFunc(total, free) // the slot frees exactly at the waiters' deadline
			var waiters []<-chan poolTestResult
			for range 1 + round%4 {
				waiters = append(waiters, poolTestGo(t.Context(), p, "tie.example."))
			}
			for _, w := range waiters {
				if r := <-w; poolTestKind(r.err) != KindBudgetExhausted || r.upstream != "" {
					t.Fatalf("round %d: Resolve = %q, %v; want budget exhausted naming none", round, r.upstream, r.err)
				}
			}
			synctest.Wait()
			poolTestAllFree(t, p)
			if t.Failed() {
				t.Fatalf("round %d", round)
			}
		}
		if f.live.Load() != 0 {
			t.Errorf("the upstream was called %d times after the deadline", f.live.Load())
		}
	})
}

// 10c. Many goroutines, short budgets, random stalls, cancellations and
// failures, in real time: afterwards every permit is back. Bounded in count
// (16 × 150 queries) and in time (each query ≤ 4 ms of budget).
func TestAdmission_stressPermitsConserved(t *testing.T) {
	exchange := func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		d := time.Duration(rand.Int64N(int64(3 * time.Millisecond)))
		answer := poolTestAnswer
		if rand.IntN(4) == 0 {
			answer = poolTestRefuse
		}
		return poolTestAfter(d, answer)(ctx, m)
	}
	p := poolTestNew(t, Options{Attempt: 2 * time.Millisecond, Total: 4 * time.Millisecond, Slots: 3},
		&fakeClient{onExchange: exchange}, &fakeClient{onExchange: exchange}, &fakeClient{onExchange: exchange})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 150 {
				ctx, cancel := context.WithCancel(context.Background())
				if rand.IntN(3) == 0 {
					time.AfterFunc(time.Duration(rand.Int64N(int64(3*time.Millisecond))), cancel)
				}
				_, _, _ = p.Resolve(ctx, poolTestQuery("stress.example."))
				cancel()
			}
		})
	}
	wg.Wait()
	poolTestAllFree(t, p)
}

// No wake-up is lost: with one slot and a crowd of waiters, every query is
// answered; a lost wake-up would leave a waiter asleep until its 10 s
// deadline. Real time, bounded: 32 × 40 instant queries.
func TestAdmission_noLostWakeups(t *testing.T) {
	var hot atomic.Int32
	f := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		if hot.Add(1) > 1 {
			t.Error("two exchanges share one slot")
		}
		defer hot.Add(-1)
		return poolTestAnswer(ctx, m)
	}}
	p := poolTestNew(t, Options{Attempt: 10 * time.Second, Total: 10 * time.Second, Slots: 1}, f)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 40 {
				if _, _, err := p.Resolve(context.Background(), poolTestQuery("crowd.example.")); err != nil {
					t.Errorf("Resolve: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	poolTestAllFree(t, p)
}

// 13. Queue accounting: only the blocking path counts; a try-acquire, hit
// or miss, never does.
func TestAdmission_queueAccounting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: poolTestAnswer}, &fakeClient{onExchange: poolTestAnswer})
		queued := func() [2]uint64 {
			s := p.Snapshot()
			return [2]uint64{s.Upstreams[0].QueuedTotal, s.Upstreams[1].QueuedTotal}
		}

		// Hit: a free slot on the primary.
		if _, up, err := p.Resolve(t.Context(), poolTestQuery("hit.example.")); err != nil || up != poolTestURL(0) {
			t.Fatalf("hit: %q, %v", up, err)
		}
		if q := queued(); q != [2]uint64{} {
			t.Errorf("after a try-acquire hit queued = %v, want none", q)
		}

		// Miss: the primary is full, the standby's try-acquire succeeds.
		free0 := poolTestHold(t, p, 0, DefaultSlots)
		if _, up, err := p.Resolve(t.Context(), poolTestQuery("miss.example.")); err != nil || up != poolTestURL(1) {
			t.Fatalf("miss: %q, %v", up, err)
		}
		if q := queued(); q != [2]uint64{} {
			t.Errorf("after a try-acquire miss queued = %v, want none", q)
		}

		// Blocked, then admitted on the primary after 250ms.
		free1 := poolTestHold(t, p, 1, DefaultSlots)
		res := poolTestGo(t.Context(), p, "blocked.example.")
		time.Sleep(250 * time.Millisecond)
		free0()
		if r := <-res; r.err != nil || r.upstream != poolTestURL(0) {
			t.Fatalf("blocked: %q, %v", r.upstream, r.err)
		}
		s := p.Snapshot()
		if s.Upstreams[0].QueuedTotal != 1 || s.Upstreams[0].QueuedSeconds != 0.25 {
			t.Errorf("primary queued = %d, %vs; want 1, 0.25s", s.Upstreams[0].QueuedTotal, s.Upstreams[0].QueuedSeconds)
		}
		if s.Upstreams[1].QueuedTotal != 0 {
			t.Errorf("standby queued = %d, want 0", s.Upstreams[1].QueuedTotal)
		}
		for range DefaultSlots - 1 {
			free0()
		}
		for range DefaultSlots {
			free1()
		}
		poolTestAllFree(t, p)
	})
}

// Step 4: an entry that goes into backoff while a query waits is skipped
// even when its slot frees first; the query takes the next slot elsewhere.
func TestAdmission_entryEnteringBackoffWhileWaitingIsSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &fakeClient{onExchange: poolTestAnswer}
		standby := &fakeClient{onExchange: poolTestAnswer}
		p := poolTestNew(t, poolTestShipped, primary, standby)
		free0 := poolTestHold(t, p, 0, DefaultSlots)
		free1 := poolTestHold(t, p, 1, DefaultSlots)

		res := poolTestGo(t.Context(), p, "a.example.")
		synctest.Wait()
		poolTestBackoff(p, 0)
		free0() // the primary's slot frees first, but it is in backoff now
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case r := <-res:
			t.Fatalf("the waiter took the primary in backoff: %q, %v", r.upstream, r.err)
		default:
		}
		free1()
		if r := <-res; r.err != nil || r.upstream != poolTestURL(1) {
			t.Fatalf("Resolve = %q, %v; want the standby", r.upstream, r.err)
		}
		if primary.live.Load() != 0 {
			t.Error("the primary in backoff was attempted")
		}
		for range DefaultSlots - 1 {
			free0()
			free1()
		}
		poolTestAllFree(t, p)
	})
}

// docs/design.md#pool-admission step 4: an entry changing state during the sweep never leaves a
// query with no attempt. Issue 12 finding 1: the sweep read an entry's
// backoff once to decide "last resort or not" and again to decide "is it a
// candidate"; an entry entering backoff between the two reads was neither,
// and the query ended SERVFAIL with EDE 0 "no upstream attempted".
func TestAdmission_backoffFlippingDuringTheSweepLeavesNoQueryUnattempted(t *testing.T) {
	up := &fakeClient{onExchange: poolTestAnswer}
	p := poolTestNew(t, poolTestShipped, up)
	e := p.entries[0]
	stop := make(chan struct{})
	flipped := make(chan struct{})
	go func() {
		defer close(flipped)
		for on := true; ; on = !on {
			select {
			case <-stop:
				e.health.backoff.Store(false)
				return
			default:
			}
			e.health.backoff.Store(on)
		}
	}()
	const queries = 50000
	unattempted := 0
	for range queries {
		if _, _, err := p.Resolve(context.Background(), poolTestQuery("flip.example.")); err != nil {
			unattempted++
		}
	}
	close(stop)
	<-flipped
	if unattempted != 0 {
		t.Errorf("%d of %d queries ended with an error although the one upstream answers every attempt", unattempted, queries)
	}
	if got := up.live.Load(); got != queries {
		t.Errorf("upstream saw %d live exchanges, want %d (one per query)", got, queries)
	}
}
