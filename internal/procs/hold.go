package procs

import (
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
)

// Holds: CPU work that starts at once and ends within a second or two (a
// filter list's rebuild or a download's check, encoding the cache file, a
// cache flush, a history overview, search or pruning) does not wait for the
// governor's windows. On one processor it would share that processor with
// the readers, which then wait out Go's 10 ms preemption slices: during a
// rebuild of a million names a calm server's p99 at 2 000 hits a second
// was 16.6 ms, against 2.1 ms held and about 2 ms on every processor
// (docs/performance.md "Holds").
//
// Guarantee: from Hold's return until its release is called, the runtime
// runs on every processor (when a governor runs), and the governor does not
// put it on one while any hold is outstanding. After the last release the
// governor's rule goes on from there: calmWindows of calm before one.

// holds counts the outstanding holds.
var holds atomic.Int32

// active is the running governor, nil when none runs (the operator set
// GOMAXPROCS, one CPU, tests of other packages): a hold is then only
// counted.
var active atomic.Pointer[governor]

// Hold gives the server every processor now, for a job that is about to
// use a CPU, until the returned release is called (once is enough; later
// calls do nothing). Cheap when already on every processor; a switch from
// one stops the world for a moment, so hold jobs, not queries.
func Hold() (release func()) {
	holds.Add(1)
	if g := active.Load(); g != nil {
		g.held()
	}
	var once sync.Once
	return func() { once.Do(func() { holds.Add(-1) }) }
}

// held puts the governor on every processor at once if it is on one. The
// count is raised before the governor's lock is taken, and endWindow reads
// it under that lock, so a window that ends meanwhile cannot go to one
// after this returns.
func (g *governor) held() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.p.runs = 0
	if !g.p.one {
		return
	}
	g.p.one = false
	g.procs.all()
	g.log.Debug("go processors", zap.Bool("one", false), zap.String("why", "held"))
}
