package cache

import (
	"sync"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// flights coalesces identical queries in flight (docs/design.md#cache-coalescing): the first query
// for a key starts one exchange, every later one for the same key waits for
// its result.
//
// Guarantee: while a flight for a key is registered, join returns it and
// never starts a second; the exchange runs on a goroutine the caller owns,
// not on any waiter's, so a waiter that leaves (its client gave up, its
// stale point came) cancels nothing (the one exception, a leader whose
// query never leaves, runs it on its own goroutine: Stage.resolve,
// query.Request.Lasting); every waiter that stays receives the
// one result, closed over done. finish unregisters the flight before it
// closes done, so a query arriving after the result was published starts
// afresh rather than reading an old failure.
//
// golang.org/x/sync/singleflight would do most of it; this one is typed (the
// cache key, no string built per query), says at join time whether a query
// joined (Event.Cache "coalesced" and the counter), and leaves the
// exchange's goroutine to the stage, whose Close waits for it.
type flights struct {
	mu sync.Mutex
	m  map[key]*flight
}

// flight is one exchange in progress and, once done is closed, its result.
type flight struct {
	done chan struct{}

	// Set before done is closed, read only after.
	msg      *dns.Msg
	err      error
	source   string   // Event.Source the route set: pool or zone:NAME
	upstream string   // Event.Upstream
	tried    []string // Event.Tried

	// The exchange's own request and event (Stage.start), held here so a
	// miss allocates them with the flight.
	req query.Request
	ev  query.Event
}

// join returns k's flight; leader is true when the caller created it and
// must run the exchange and call finish.
func (f *flights) join(k key) (fl *flight, leader bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fl, ok := f.m[k]; ok {
		return fl, false
	}
	if f.m == nil {
		f.m = make(map[key]*flight)
	}
	fl = &flight{done: make(chan struct{})}
	f.m[k] = fl
	return fl, true
}

// finish publishes fl's result (already set on fl) to its waiters.
func (f *flights) finish(k key, fl *flight) {
	f.mu.Lock()
	if f.m[k] == fl {
		delete(f.m, k)
	}
	f.mu.Unlock()
	close(fl.done)
}
