package server

import "sync/atomic"

// atomicMax tracks a running count and its peak in tests.
type atomicMax struct{ v atomic.Int64 }

func (a *atomicMax) add(d int64) { a.v.Add(d) }
func (a *atomicMax) load() int64 { return a.v.Load() }
func (a *atomicMax) observe(n int64) {
	for {
		cur := a.v.Load()
		if n <= cur || a.v.CompareAndSwap(cur, n) {
			return
		}
	}
}
