package cache

import (
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// store is the cache's bounded map: at most limit entries and maxBytes of
// memory (weight.go), evicted by otter's W-TinyLFU, which admits a new name over an old one only when the
// new one has been asked more often recently. A flood of names asked once
// (a scanner, random-subdomain queries, a looping device) then cycles
// through a small window while the household's hot names stay, where an LRU,
// 2Q or CLOCK store loses every hot name as soon as the flood between two
// asks of it exceeds the bound (docs/cache.md has the numbers).
//
// Only the bound is otter's: expiry and refresh are the cache's own, since
// an expired entry must stay for serve-stale and a refresh must spend the
// query's budget (docs/design.md#serve-stale), neither of which otter's expiry and refresh
// calculators model. Safe for concurrent use.
type store struct {
	c         *otter.Cache[key, *entry]
	limit     int
	maxBytes  int64
	evicted   atomic.Uint64 // entries dropped to keep the bound
	oversized atomic.Uint64 // answers not stored: heavier than maxEntryWeight
}

// entryShare is the most of the byte budget one entry may take: an answer
// weighing more is given to its client but not stored (counted in
// oversized). A 64 KB answer can parse into megabytes (weight.go); stored,
// a handful of such names a web page asks for would push out the household's
// hundreds of small ones.
const entryShare = 64

// newStore returns a store of at most limit entries and maxBytes of weight.
// Both bounds are otter's one weight bound: an entry weighs at least
// maxBytes/limit, so at most limit of them fit. (A weight is a uint32: past
// 4 GiB a budget per entry, possible only with a handful of entries and a
// budget of many gigabytes, the floor is 4 GiB and the byte bound alone
// holds.)
func newStore(limit int, maxBytes int64) *store {
	s := &store{limit: limit, maxBytes: maxBytes}
	floor := uint32(min(maxBytes/int64(max(limit, 1)), 1<<32-1))
	s.c = otter.Must(&otter.Options[key, *entry]{
		MaximumWeight: uint64(maxBytes),
		Weigher:       func(_ key, e *entry) uint32 { return max(e.weight, floor) },
		Clock:         noClock{},
		// Maintenance (the write buffer drained into the eviction policy,
		// evictions) runs on the goroutine that wrote, not on a goroutine
		// created for it: otter's default starts one per write, which is a
		// goroutine created, its stack grown and a thread woken on every
		// miss (docs/performance.md "The miss path, end to end"). Safe here
		// because no function the store gives otter (OnAtomicDeletion, the
		// Compute functions) calls the cache. Maintenance a pass leaves
		// unfinished waits for the next write or read.
		Executor: func(fn func()) { fn() },
		// Runs under a bucket lock: it may touch nothing of the cache.
		OnAtomicDeletion: func(e otter.DeletionEvent[key, *entry]) {
			if e.Cause == otter.CauseOverflow {
				s.evicted.Add(1)
			}
		},
	})
	return s
}

// get returns k's entry, or nil; it counts as a use of k for eviction.
func (s *store) get(k key) *entry {
	e, _ := s.c.GetIfPresent(k)
	return e
}

// put stores e under k, replacing what k held, and reports whether it did:
// an entry heavier than the store's share for one entry is not stored (and
// k keeps what it held; Cache.learn drops that, superseded).
func (s *store) put(k key, e *entry) bool {
	w := weigh(e)
	if int64(w) > s.maxEntryWeight() {
		s.oversized.Add(1)
		return false
	}
	e.weight = uint32(w)
	s.c.Set(k, e)
	return true
}

// maxEntryWeight is the heaviest entry the store keeps.
func (s *store) maxEntryWeight() int64 { return s.maxBytes / entryShare }

// bytes is the weight held now (weight.go), within the same moment's lag
// as len.
func (s *store) bytes() int64 { return int64(s.c.WeightedSize()) }

// remove deletes k if it still holds e (nil: whatever it holds), so a
// cleanup of an old entry never removes its fresh replacement.
func (s *store) remove(k key, e *entry) {
	s.c.ComputeIfPresent(k, func(old *entry) (*entry, otter.ComputeOp) {
		if e == nil || old == e {
			return nil, otter.InvalidateOp
		}
		return old, otter.CancelOp
	})
}

// removeIf deletes every entry drop returns true for and returns how many.
// An entry replaced meanwhile is judged again on its new value.
func (s *store) removeIf(drop func(key, *entry) bool) int {
	n := 0
	for k := range s.c.Keys() {
		s.c.ComputeIfPresent(k, func(old *entry) (*entry, otter.ComputeOp) {
			if drop(k, old) {
				n++
				return nil, otter.InvalidateOp
			}
			return old, otter.CancelOp
		})
	}
	return n
}

// each calls f for every entry; f must not call the store.
func (s *store) each(f func(key, *entry)) {
	for k, e := range s.c.All() {
		f(k, e)
	}
}

// len is the number of entries held. otter applies writes in batches on a
// goroutine of its own, so for a moment after a burst of new names the
// store may hold more than limit, by at most its write buffer (128 entries
// per CPU); the bound holds again once that goroutine has run.
func (s *store) len() int { return s.c.EstimatedSize() }

// noClock is otter's clock: the store gives otter no expiry (the cache
// keeps its own times), so otter needs no time, where its default clock
// would read the system clock on every get. No ticks: there is nothing for
// otter to expire.
type noClock struct{}

func (noClock) NowNano() int64                      { return 0 }
func (noClock) Tick(time.Duration) <-chan time.Time { return nil }

// close stops otter's background maintenance.
func (s *store) close() { s.c.StopAllGoroutines() }
