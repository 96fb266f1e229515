// Package workers runs jobs on goroutines that outlive one job, so each
// keeps the stack it grew for the next: the UDP queries of the server and
// the cache's upstream exchanges (docs/performance.md "Where a miss goes").
package workers

import (
	"sync"
	"time"
)

// Workers runs jobs on goroutines that outlive one job. A fresh goroutine
// per job starts on a small stack and grows it along the job's call chain
// (for a query: parse, stages, pack, the query-log line; for an upstream
// exchange: the pool, TLS, unpacking) every time, and copying the stack as
// it grows costs more than the work around it (docs/performance.md#answer-cache,
// "Where a miss goes"). A worker keeps its grown stack for the next job.
//
// Guarantees: Run never blocks and never queues: the job goes to a worker
// idle at that instant or to a new goroutine, so whatever bounds the callers
// (the listener caps, docs/design.md#listener-caps) stays the only bound on
// jobs in flight, and a slow job never delays another. A worker idle for
// Idle exits, so the goroutines (and their stacks) held after a burst
// shrink back to none; Stop makes every idle worker exit, and Wait returns
// once every worker has.
type Workers struct {
	jobs  chan func() // unbuffered: a send succeeds only into an idle worker
	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	idle  time.Duration
}

// Idle is how long a worker waits for another job before it exits:
// long enough to span the gaps of a busy household's traffic, short enough
// that a burst's thousand goroutines are gone seconds after it.
const Idle = 5 * time.Second

// New returns a set of workers; none runs until the first job.
func New() *Workers {
	return &Workers{jobs: make(chan func()), stopc: make(chan struct{}), idle: Idle}
}

// Run starts f on an idle worker, or on a new one.
func (w *Workers) Run(f func()) {
	select {
	case w.jobs <- f:
	default:
		w.wg.Go(func() { w.work(f) })
	}
}

func (w *Workers) work(f func()) {
	f()
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		select {
		case f := <-w.jobs:
			f()
			t.Reset(w.idle)
		case <-t.C:
			return
		case <-w.stopc:
			return
		}
	}
}

// Stop makes the idle workers exit and every busy one exit after its job;
// Run still works afterwards (each job then runs on a goroutine of its own
// that exits with it), so a late query is answered, never lost.
func (w *Workers) Stop() { w.once.Do(func() { close(w.stopc) }) }

// Wait returns once every worker has exited; call it after Stop.
func (w *Workers) Wait() { w.wg.Wait() }
