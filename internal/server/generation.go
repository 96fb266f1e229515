package server

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/nxdns/nxdns/internal/query"
)

// generation is one State and the queries that started on it. Swap retires a
// generation; its done channel closes once the last of those queries has
// finished, which tells a reload when the old pool can be closed.
//
// Guarantee: acquire returns a generation only if it was still current
// after the query pinned it, so after Swap returns no query can start on a
// retired generation, and done closes exactly once, after every query that
// acquire handed it to has released it. A pin that loses the race with Swap
// is released unused. No lock: acquire is on every query, cache hits
// included, and a read lock is two atomic writes to a word every CPU's
// readers share, which bounced between the CPUs on each query
// (docs/performance.md#answer-cache).
//
// "Retired" and "nobody holds it" live in one word, refs, so one atomic
// operation sees both at once. With a separate flag, a release could see
// zero holders, a query then pin the still-current generation, Swap retire
// it, and the release go on to read the flag and close done under that
// query.
type generation struct {
	st    *State
	chain query.Handler // st.Stages, then the route: built once per State
	fast  *fastPath     // cache hits from the wire (fastpath.go); nil when the stages allow none
	refs  atomic.Int64  // queries holding this generation, plus retiredMark once Swap retired it
	once  sync.Once
	done  chan struct{} // closed when refs is retiredMark: retired, and nothing holds it
}

// retiredMark is what Swap adds to a generation's refs when it retires it:
// far above any number of queries, so refs == retiredMark means retired
// and unheld.
const retiredMark = 1 << 62

func newGeneration(st *State) *generation {
	return &generation{
		st:    st,
		chain: query.Chain(route{router: st.Router, guard: st.Guard}, st.Stages...),
		fast:  newFastPath(st.Stages, st.Sinks),
		done:  make(chan struct{}),
	}
}

// acquire pins the current generation for one query; release it when the
// query has finished (answer written, line logged).
func (s *Server) acquire() *generation {
	for {
		g := s.gen.Load()
		g.refs.Add(1)
		// Swap makes the next generation current before it reads refs: if
		// g is still current, Swap's read of refs comes after this pin.
		if s.gen.Load() == g {
			return g
		}
		g.release()
	}
}

func (g *generation) release() {
	// Either this release or Swap's mark sees "retired and unheld"; the
	// Once makes seeing it twice (a losing pin's release) harmless.
	if g.refs.Add(-1) == retiredMark {
		g.finish()
	}
}

func (g *generation) finish() { g.once.Do(func() { close(g.done) }) }

// Swap makes st the state of every query that starts from now on. Queries
// already running keep the state they started with. drained blocks until the
// last of them has finished with it — resolved, answer encoded, line logged —
// or ctx ends (returning ctx.Err()), so the caller can then release what only
// the old state used, such as the old pool.
func (s *Server) Swap(st *State) (drained func(ctx context.Context) error) {
	old := s.gen.Swap(newGeneration(st))
	// After the swap: a query that pins old from now on sees another
	// generation current and lets go, so the holders counted here are all
	// old will ever have.
	if old.refs.Add(retiredMark) == retiredMark {
		old.finish()
	}
	return func(ctx context.Context) error {
		select { // done first: a spent ctx must not hide a finished drain
		case <-old.done:
			return nil
		default:
		}
		select {
		case <-old.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
