package server

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/nxdns/nxdns/internal/query"
)

// capacity is a non-blocking admission counter: a listener takes a unit or
// turns the work away at once, never queues it (docs/design.md#listener-caps: beyond the cap a UDP
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

// Address families index the per-family caps: docs/design.md#listener-caps bounds IPv4 and IPv6
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

// clientShares bounds how much of a listener cap one client holds
// (docs/design.md#client-shares: one client address holds at most a small share of the TCP
// connections and of the UDP queries in flight, so a flooding or greedy host
// degrades only itself). A client is an IPv4 address or an IPv6 /64: a
// host picks any address of its /64 at will (privacy addresses, RFC 8981),
// so counting IPv6 addresses one by one would be no bound at all.
//
// Guarantee: the units held under one client key never exceed max, and the
// map holds only keys with units held (it shrinks back to empty), so its
// size is bounded by the caps it sits beside. A mutex, not a sharded map:
// the critical section is a map update, far below a datagram's other costs.
type clientShares struct {
	mu   sync.Mutex // guards held
	held map[netip.Prefix]int32
	max  int32
}

func newClientShares(max int) *clientShares {
	return &clientShares{held: make(map[netip.Prefix]int32), max: int32(max)}
}

// clientKey is the unit clientShares counts: the IPv4 address, or the IPv6
// /64 the address is in (query.ClientShareKey, as the web endpoint counts).
func clientKey(a netip.Addr) netip.Prefix { return query.ClientShareKey(a) }

// tryAcquire takes a unit of k's share and reports whether it did.
func (c *clientShares) tryAcquire(k netip.Prefix) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[k] >= c.max {
		return false
	}
	c.held[k]++
	return true
}

// release returns a unit taken by tryAcquire.
func (c *clientShares) release(k netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held[k]--; c.held[k] <= 0 {
		delete(c.held, k)
	}
}

// Per-client shares of the listener caps (docs/server.md says why these).
const (
	// udpClientShare is one client's share of a family's UDP queries in
	// flight: half the cap. A client is usually one device, and a device
	// waking up (a phone, a smart TV, a browser restoring its tabs) sends
	// bursts of hundreds at once (docs/design.md#lesson-bursts), some of which may sit
	// on a saturated primary while the rest go to the standby: 512 carries
	// such a burst with room, and a router forwarding a whole LAN to nxdns
	// (one source) gets over 25 000 queries a second at a 20 ms upstream. A
	// flooder held to it leaves the other half to everyone else, so it
	// degrades itself only (docs/server.md has the measurements).
	udpClientShare = maxUDPInFlight / 2
	// tcpClientShare is one client's share of a family's TCP connections:
	// an eighth, and never less than 8. A stub opens one or two for
	// truncated answers; a greedy host holding its whole share leaves the
	// rest to the others.
	tcpClientShare = min(max(maxTCPConns/8, 8), maxTCPConns-maxTCPConns/8)
	// dohClientShare is one client's DoH queries in flight, counted until
	// each query's work ends rather than its stream (doh.go): what its
	// share of connections runs at once while every stream waits for its
	// answer, and the same as its UDP share.
	dohClientShare = tcpClientShare * maxConnQueries
)
