package upstream

import (
	"context"
	"net/netip"
	"sync"

	nxquery "github.com/nxdns/nxdns/internal/query"
)

// One client's share of the slots (docs/upstream-pool.md "One client's
// share"). The listeners bound what one client holds of their caps; the
// pool's slots are the same kind of scarce thing, and without a share a
// flood of unique names from one host holds every slot while a normal
// client's miss waits among the flood's queries for one, woken in no order.
//
// A client (an IPv4 address, or an IPv6 /64, as the listeners count them)
// may hold up to half of an entry's slots (rounded up) whatever else
// happens. Beyond that it may take a free slot only while no other client's
// query waits at the pool: an idle pool is all one client's (a router
// forwarding a whole LAN as one source keeps every slot), a contended one
// keeps half of each entry for everyone else. Since only one client at a
// time can hold half of the slots rounded up while a slot is free, a free
// slot with a query waiting for it always has a taker. A client turned away
// because another's query waited is woken when that wait ends and no other
// client's query waits any more (end), not only at the next release: its
// query would otherwise sit beside a free slot until then.
//
// Queries with no client (the prober, nxdns's own lookups) are not counted.

type clientCtxKey struct{}

// WithClient returns ctx carrying the client a query is asked for, in the
// form query.ClientOf gives; the pool counts the query against that client's
// share of the slots.
func WithClient(ctx context.Context, client netip.Addr) context.Context {
	if !client.IsValid() {
		return ctx
	}
	return &clientCtx{Context: ctx, client: client}
}

// clientCtx is context.WithValue(ctx, clientCtxKey{}, client) in one
// allocation rather than two: the address is held in place, and Value
// hands out a pointer to it, where WithValue would box the address on its
// own (every miss pays it: BenchmarkMiss's allocs/op re-measures it).
type clientCtx struct {
	context.Context
	client netip.Addr
}

func (c *clientCtx) Value(key any) any {
	if key == (clientCtxKey{}) {
		return &c.client
	}
	return c.Context.Value(key)
}

// shareKey is the unit a share counts: the IPv4 address, or the IPv6 /64
// the address is in (a host picks any address of its /64 at will).
func shareKey(ctx context.Context) (netip.Prefix, bool) {
	a, ok := ctx.Value(clientCtxKey{}).(*netip.Addr)
	if !ok {
		return netip.Prefix{}, false
	}
	return nxquery.ClientShareKey(*a), true
}

// shares counts the slots each client holds on each entry and the queries
// each client has waiting. A mutex, not atomics: the critical sections are
// map updates, beside an upstream exchange's milliseconds.
type shares struct {
	mu      sync.Mutex
	held    map[heldKey]int32
	waiting map[netip.Prefix]int32
	waiters int32 // queries with a client inside Pool.wait
	// refused is set when take turns a query away for another client's
	// waiting one, and cleared when end reports that the waits it counted
	// are over.
	refused bool
}

type heldKey struct {
	pos    uint8
	client netip.Prefix
}

// share is one client's share of e's slots: half, rounded up. Rounded
// down, two clients at their share of an odd number of slots would each be
// turned away for the other's waiting query with a slot free.
func share(e *entry) int32 { return int32((e.slots + 1) / 2) }

// take counts a slot of e for qs's client and reports whether the client
// may have it; the caller then tries the slot itself and calls give if it
// did not get it.
func (s *shares) take(e *entry, qs *query) bool {
	if !qs.hasClient {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := heldKey{e.pos, qs.client}
	if s.held[k] >= share(e) && s.waiters > s.waiting[qs.client] {
		s.refused = true
		return false
	}
	if s.held == nil {
		s.held = make(map[heldKey]int32)
	}
	s.held[k]++
	return true
}

// give returns a slot of e counted by take.
func (s *shares) give(e *entry, qs *query) {
	if !qs.hasClient {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := heldKey{e.pos, qs.client}
	if s.held[k]--; s.held[k] <= 0 {
		delete(s.held, k)
	}
}

// begin counts qs's client as waiting.
func (s *shares) begin(qs *query) { s.wait(qs, 1) }

// end counts qs's wait as over and reports whether the waiters must be
// woken: a query was turned away for another client's waiting one, and at
// most one client's queries wait now, so none of them is turned away any
// more.
func (s *shares) end(qs *query) (wake bool) {
	if !qs.hasClient {
		return false
	}
	s.wait(qs, -1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refused && len(s.waiting) <= 1 {
		s.refused = false
		return true
	}
	return false
}

// wait counts qs's client as waiting (d = 1) or no longer (d = -1).
func (s *shares) wait(qs *query, d int32) {
	if !qs.hasClient {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiting == nil {
		s.waiting = make(map[netip.Prefix]int32)
	}
	s.waiters += d
	if s.waiting[qs.client] += d; s.waiting[qs.client] <= 0 {
		delete(s.waiting, qs.client)
	}
}
