package server

import (
	"sync"
	"time"
)

// workers runs the UDP queries on goroutines that outlive one query. A
// fresh goroutine per datagram starts on a small stack and grows it along
// the handler's call chain (parse, stages, pack, the query-log line) on
// every query: at cache-hit rates the stack copies alone cost more than the
// cache lookup (docs/performance.md#answer-cache). A worker keeps its
// grown stack for the next query.
//
// Guarantees: run never blocks and never queues: the job goes to a worker
// idle at that instant or to a new goroutine, so the listener caps stay the
// only bound on queries in flight (docs/design.md#listener-caps) and a slow query never delays
// another. A worker idle for workerIdle exits, so the goroutines (and their
// stacks) held after a burst shrink back to none; stop makes every idle
// worker exit, and wait returns once every worker has.
type workers struct {
	jobs  chan func() // unbuffered: a send succeeds only into an idle worker
	stopc chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	idle  time.Duration
}

// workerIdle is how long a worker waits for another job before it exits:
// long enough to span the gaps of a busy household's traffic, short enough
// that a burst's thousand goroutines are gone seconds after it.
const workerIdle = 5 * time.Second

func newWorkers() *workers {
	return &workers{jobs: make(chan func()), stopc: make(chan struct{}), idle: workerIdle}
}

// run starts f on an idle worker, or on a new one.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		w.wg.Go(func() { w.work(f) })
	}
}

func (w *workers) work(f func()) {
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

// stop makes the idle workers exit and every busy one exit after its job;
// run still works afterwards (each job then runs on a goroutine of its own
// that exits with it), so a late query is answered, never lost.
func (w *workers) stop() { w.once.Do(func() { close(w.stopc) }) }

// wait returns once every worker has exited; call it after stop.
func (w *workers) wait() { w.wg.Wait() }
