package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Admission (docs/design.md#pool-admission): a query takes a slot on the first entry, in priority
// order, that has one free right now, and blocks only when none has, on all of
// them at once. docs/design.md#lesson-no-wait: a saturated primary never makes a query
// wait while the standby has capacity.
//
// Each entry's slots are a semaphore.Weighted used only through TryAcquire
// and Release; the blocking wait is built here from the try-acquire sweep and
// a pool-wide wake-up board, so no goroutine ever sits inside the semaphore
// holding a claim on one entry while another entry frees up.

// board wakes blocked queries when anything they wait for may have changed:
// a slot was released, or an entry entered or left backoff.
//
// No wake-up is lost. A waiter registers (waiters.Add), then takes the
// current channel, then sweeps. A releaser returns its permit, then reads
// waiters. Either the release is ordered before the waiter's TryAcquire, and
// the sweep sees the free slot; or the TryAcquire came first, so the
// registration did too, the releaser sees waiters > 0 and closes the channel
// the waiter holds (or a later one it replaced, after closing this one).
type board struct {
	waiters atomic.Int32  // queries inside wait; releases skip the lock when zero
	mu      sync.Mutex    // guards changed
	changed chan struct{} // closed on the next change; nil while nobody listens
}

// listen returns a channel that is closed at the next notify.
func (b *board) listen() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// notify wakes every current listener. It costs one atomic load when nobody
// waits, which is the hot path's case.
func (b *board) notify() {
	if b.waiters.Load() == 0 {
		return
	}
	b.mu.Lock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	b.mu.Unlock()
}

// admit finds this query an entry and holds one of its slots: docs/design.md#pool-admission
// steps 1, 3, 4 and 5; the Resolve loop provides steps 2 and 6 by calling
// it again with the tried entries marked.
//
// It returns nil and no error when nothing is left to try: the query's last
// outcome decides its answer. An error is the wait's end (KindBudgetExhausted
// at until, or KindCanceled when ctx ends) and never holds a permit. The
// wait's timer is armed only when the query has to wait: a free slot costs
// none.
func (p *Pool) admit(ctx context.Context, until time.Time, qs *query) (*entry, *AttemptError) {
	e, found := p.sweep(qs)
	switch {
	case e != nil:
		return e, nil
	case !found:
		return nil, nil
	}
	ctx, cancel := context.WithDeadlineCause(ctx, until, KindBudgetExhausted)
	defer cancel()
	return p.wait(ctx, qs)
}

// sweep is one pass over the candidates in priority order that takes a slot
// only where one is free right now (steps 1 and 5 without blocking). found
// reports whether any candidate exists at all.
//
// Every entry's backoff is read once, into one mask, and both decisions of
// the pass — last resort or not, and which entries are candidates — come
// from that mask. Read twice, an entry entering backoff between the reads
// would be neither a candidate outside backoff nor one of the last resort,
// and the query would end with no attempt at all (docs/design.md#pool-admission step 4).
func (p *Pool) sweep(qs *query) (_ *entry, found bool) {
	backoff := p.backoffMask()
	lastResort := qs.lastResort(backoff, p.all())
	for _, e := range p.entries {
		if !qs.candidate(e, backoff, lastResort) {
			continue
		}
		found = true
		// The client's share first: a client over it leaves the slot to
		// another client's waiting query (fair.go).
		if !p.shares.take(e, qs) {
			continue
		}
		if !e.sem.TryAcquire(1) {
			p.shares.give(e, qs)
			continue
		}
		// Step 4: it may have entered backoff after the mask was read; then
		// it is released here, and the next sweep (the caller waits on the
		// board, which this release notifies) finds it as a last resort.
		if !lastResort && e.health.backoff.Load() {
			p.release(e, qs)
			continue
		}
		return e, true
	}
	return nil, found
}

// backoffMask is the entries in backoff now, one bit each.
func (p *Pool) backoffMask() uint64 {
	var m uint64
	for _, e := range p.entries {
		if e.health.backoff.Load() {
			m |= e.bit
		}
	}
	return m
}

// all is the mask of every entry (a shift by 64 is 0 in Go, so 64 entries
// give every bit).
func (p *Pool) all() uint64 { return 1<<len(p.entries) - 1 }

// wait blocks until a slot frees on any candidate (steps 3 and 5), bounded by
// the query's context; priority breaks ties because every wake-up re-sweeps
// in priority order. Waiters are not served in arrival order: each is
// bounded by its own deadline, and a FIFO across entries would need a lock
// on every release.
//
// Guarantee: a waiter that returns an error holds no permit. The only
// acquisition is the sweep's TryAcquire, and a permit taken in the same
// instant the context ends is given back before returning. The wait counts
// once in queued_total and queued_seconds_total of the entry it ended on (the
// one admitted, else the first candidate), whatever ended it.
func (p *Pool) wait(ctx context.Context, qs *query) (*entry, *AttemptError) {
	start := time.Now()
	p.board.waiters.Add(1)
	defer p.board.waiters.Add(-1)
	p.shares.begin(qs)
	defer func() {
		if p.shares.end(qs) {
			p.board.notify() // a query turned away for this one's wait may go now (fair.go)
		}
	}()
	for {
		changed := p.board.listen()
		e, found := p.sweep(qs)
		switch {
		case e != nil && ctx.Err() != nil:
			p.release(e, qs) // the expiry won the same instant
			p.countQueued(e, start)
			return nil, ended(ctx)
		case e != nil:
			p.countQueued(e, start)
			return e, nil
		case !found: // every candidate changed state under us: nothing to wait for
			return nil, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			p.countQueued(p.firstCandidate(qs), start)
			return nil, ended(ctx)
		}
	}
}

// release returns a slot qs held and wakes the waiters.
func (p *Pool) release(e *entry, qs *query) {
	p.shares.give(e, qs)
	e.sem.Release(1)
	p.board.notify()
}

func (p *Pool) countQueued(e *entry, since time.Time) {
	if e == nil {
		return
	}
	e.queued.Add(1)
	e.queuedNanos.Add(int64(time.Since(since)))
}

func (p *Pool) firstCandidate(qs *query) *entry {
	backoff := p.backoffMask()
	lastResort := qs.lastResort(backoff, p.all())
	for _, e := range p.entries {
		if qs.candidate(e, backoff, lastResort) {
			return e
		}
	}
	return nil
}

// ended is the error of a query whose context ended while it waited.
func ended(ctx context.Context) *AttemptError {
	return &AttemptError{Kind: causeKind(ctx), Err: ctx.Err()}
}
