package history

import (
	"runtime"
	"time"
)

// paceSlice is how much flush work runs between two pauses: about ten
// cache hits' worth of waiting for a datagram that arrives meanwhile.
const paceSlice = 200 * time.Microsecond

// paceEvery is how many steps pass between two looks at the clock.
const paceEvery = 64

// pacer lets a long flush step aside for the DNS readers. Its guarantee:
// between two calls of step, a flush runs at most about paceSlice (plus
// paceEvery steps) before it parks, and a parked goroutine makes the
// scheduler poll the network, so a reader whose datagram arrived runs
// before the flush goes on.
//
// Why it is needed: Go preempts a busy goroutine only every 10 ms, and one
// that merely yields (runtime.Gosched) is picked again before the network
// is polled. On one processor (a single-core board, or a server pinned to
// one CPU) a full buffer's flush of 50 000 events, ~80 ms of work, made
// every datagram that arrived meanwhile wait in 10 ms slices; so does a
// calm server on a bigger board, which the governor (internal/procs) keeps
// on one processor. With more processors another one polls the network
// while the flush runs, so there the pacer does not pause: a pause with
// nothing waiting sleeps for the runtime's shortest poll, about a
// millisecond. It asks at each look at the clock, since the governor may
// change the number during a flush.
//
// A pacer is used by one goroutine.
type pacer struct {
	on    bool
	n     int
	since time.Time
}

func newPacer() *pacer { return &pacer{on: onOneProcessor(), since: time.Now()} }

func onOneProcessor() bool { return runtime.GOMAXPROCS(0) == 1 }

// step marks one unit of work (a row) and pauses when the slice is spent.
func (p *pacer) step() {
	p.n++
	if p.n%paceEvery != 0 {
		return
	}
	p.on = onOneProcessor()
	if !p.on || time.Since(p.since) < paceSlice {
		return
	}
	// Parked, the goroutine lets the scheduler poll the network; the flush
	// resumes once the readers that were ready have run.
	time.Sleep(pausePark)
	p.since = time.Now()
}

// pausePark is how long a pause asks to sleep. It must outlast the
// scheduler's look at its timers, or the flush is ready again before the
// network is polled; when nothing is waiting the runtime's poll sleeps at
// least a millisecond, which only the flush pays.
const pausePark = 20 * time.Microsecond
