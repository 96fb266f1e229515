// The hand-written candidate: a sharded CLOCK (second-chance) store, the
// first version of internal/cache/store.go, kept here for the comparison.

package cachecompare

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// store is the cache's bounded map: at most limit entries, evicted by CLOCK
// (second chance), the policy of Linux's page cache and of many DNS caches.
//
// Guarantee: the store never holds more than its limit (split evenly over
// its shards, rounded up), and an entry read since the clock hand last
// passed it survives the next eviction sweep, so names asked again and again
// stay while a flood of names asked once cycles through the cold slots. A
// hit takes a shard's read lock and sets one bit: hits on different keys
// never write shared memory, unlike an LRU list that moves an element on
// every read. Safe for concurrent use.
//
// docs/cache.md compares it with maypok86/otter/v2 and hashicorp/golang-lru/v2.
type store struct {
	seed   maphash.Seed
	shards []shard
	limit  int // total bound, as configured
}

// shardMin is the smallest bound per shard worth sharding for: below it one
// shard keeps the bound exact (a 3-entry cache holds 3, not 16×1).
const shardMin = 256

// maxShards spreads lock traffic over enough locks for a small appliance's
// few cores; more would only cost memory.
const maxShards = 16

type shard struct {
	mu    sync.RWMutex // guards m, slots and hand; ref bits are atomic
	m     map[key]int32
	slots []slot
	cap   int
	hand  int
}

type slot struct {
	k   key
	e   *entry
	ref atomic.Bool // read since the hand last passed
}

func newStore(limit int) *store {
	n := 1
	for n < maxShards && limit/(n*2) >= shardMin {
		n *= 2
	}
	per := (limit + n - 1) / n
	s := &store{seed: maphash.MakeSeed(), shards: make([]shard, n), limit: limit}
	for i := range s.shards {
		s.shards[i] = shard{m: make(map[key]int32), cap: per}
	}
	return s
}

func (s *store) shard(k key) *shard {
	if len(s.shards) == 1 {
		return &s.shards[0]
	}
	h := maphash.String(s.seed, k.name) ^ uint64(k.qtype)<<8 ^ uint64(k.flags)
	return &s.shards[h&uint64(len(s.shards)-1)]
}

// get returns k's entry, or nil, and marks it referenced.
func (s *store) get(k key) *entry {
	sh := s.shard(k)
	sh.mu.RLock()
	i, ok := sh.m[k]
	var e *entry
	if ok {
		sl := &sh.slots[i]
		if !sl.ref.Load() { // read before write: a hot slot's cache line stays shared
			sl.ref.Store(true)
		}
		e = sl.e
	}
	sh.mu.RUnlock()
	return e
}

// put stores e under k, replacing what k held, and reports how many entries
// it evicted to make room (0 or 1).
func (s *store) put(k key, e *entry) (evicted int) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.m[k]; ok {
		sh.slots[i].e = e
		return 0
	}
	if len(sh.slots) < sh.cap {
		sh.m[k] = int32(len(sh.slots))
		sh.slots = append(sh.slots, slot{k: k, e: e})
		return 0
	}
	// Sweep: clear reference bits until a slot without one comes round. At
	// most one full turn, since the first turn clears every bit.
	for {
		sl := &sh.slots[sh.hand]
		if sl.ref.Load() {
			sl.ref.Store(false)
			sh.hand = (sh.hand + 1) % len(sh.slots)
			continue
		}
		delete(sh.m, sl.k)
		sl.k, sl.e = k, e
		sh.m[k] = int32(sh.hand)
		sh.hand = (sh.hand + 1) % len(sh.slots)
		return 1
	}
}

// remove deletes k if it still holds e (nil: whatever it holds).
func (s *store) remove(k key, e *entry) {
	sh := s.shard(k)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if i, ok := sh.m[k]; ok && (e == nil || sh.slots[i].e == e) {
		sh.removeAt(int(i))
	}
}

// removeAt deletes slot i, moving the last slot into its place. Caller
// holds mu for writing.
func (sh *shard) removeAt(i int) {
	delete(sh.m, sh.slots[i].k)
	last := len(sh.slots) - 1
	if i != last {
		sh.slots[i].k, sh.slots[i].e = sh.slots[last].k, sh.slots[last].e
		sh.slots[i].ref.Store(sh.slots[last].ref.Load())
		sh.m[sh.slots[i].k] = int32(i)
	}
	sh.slots[last] = slot{}
	sh.slots = sh.slots[:last]
	if sh.hand >= len(sh.slots) {
		sh.hand = 0
	}
}

// removeIf deletes every entry drop returns true for and returns how many.
// drop runs under the shard's write lock: it must not call the store.
func (s *store) removeIf(drop func(key, *entry) bool) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for j := 0; j < len(sh.slots); {
			if drop(sh.slots[j].k, sh.slots[j].e) {
				sh.removeAt(j)
				n++
				continue // slot j now holds what was the last slot
			}
			j++
		}
		sh.mu.Unlock()
	}
	return n
}

// each calls f for every entry, shard by shard, under the shard's read lock.
func (s *store) each(f func(key, *entry)) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		for j := range sh.slots {
			f(sh.slots[j].k, sh.slots[j].e)
		}
		sh.mu.RUnlock()
	}
}

// len is the number of entries held.
func (s *store) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.RLock()
		n += len(sh.slots)
		sh.mu.RUnlock()
	}
	return n
}
