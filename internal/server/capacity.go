package server

import (
	"net/netip"
	"sync/atomic"
)

// capacity is a non-blocking admission counter: a listener takes a unit or
// turns the work away at once, never queues it (SPEC §9: beyond the cap a UDP
// query is dropped, a TCP connection refused). It is a counter rather than a
// golang.org/x/sync/semaphore because the metrics read the number in use, and
// a Weighted does not expose it; keeping the count once avoids a second,
// drifting gauge beside the semaphore.
//
// Guarantee: the number of units held never exceeds max, even transiently,
// and a tryAcquire fails only when max units are held at that instant (a
// compare-and-swap loop, not add-then-undo, so a racing acquirer is never
// refused by another's overshoot).
type capacity struct {
	n   atomic.Int64
	max int64
}

// tryAcquire takes a unit if one is free and reports whether it did.
func (c *capacity) tryAcquire() bool {
	for {
		cur := c.n.Load()
		if cur >= c.max {
			return false
		}
		if c.n.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

// release returns a unit taken by tryAcquire.
func (c *capacity) release() { c.n.Add(-1) }

// inUse is the number of units held now, for the metrics gauges.
func (c *capacity) inUse() int64 { return c.n.Load() }

// Address families index the per-family caps: SPEC §9 bounds IPv4 and IPv6
// separately, so a flood over one family cannot starve the other.
const (
	familyV4 = iota
	familyV6
	numFamilies
)

// family classifies a client address (unmapped: an IPv4 client reaching a
// dual-stack socket is still an IPv4 client).
func family(a netip.Addr) int {
	if a.Unmap().Is4() {
		return familyV4
	}
	return familyV6
}
