// Package episodes keeps the upstreams' backoff episodes over time
// (the episodes of docs/design.md#pool-health, shown by the dashboard's upstreams page, docs/design.md#dashboard): when
// each upstream entered backoff, why, and when it came back.
//
// A pool is rebuilt at every reload, so it cannot keep this history
// itself. A Log belongs to the composition root and outlives generations:
// each generation's pool reports its transitions to it (the App adapts
// upstream.HealthObserver to Began and Serving). It holds the last Max
// episodes in memory, open ones included, and hands each episode that ends
// to a Store (the query history's bbolt file), from which the next start
// reads them back.
package episodes

import (
	"slices"
	"sync"
	"time"
)

// DefaultMax bounds the episodes kept in memory, all upstreams together:
// a flapping upstream fills it in a few hours at most, which is what a
// household looking at "what went wrong today" needs; the store keeps the
// rest within the history's age budget.
const DefaultMax = 200

// maxDetail bounds an episode's detail text (it comes from an error).
const maxDetail = 300

// Episode is one stretch of an upstream in backoff.
type Episode struct {
	Upstream string    // the upstream's redacted URL
	Start    time.Time // when it entered backoff
	End      time.Time // when it served again; zero while the episode is open
	Cause    string    // the fault class of the failure that began it ("attempt timeout", "network error", …)
	Detail   string    // that failure in words, without URLs; "" when it says no more than Cause
	// Failures is how many failed attempts and probes the pool recorded
	// in a row, from the first failure to the recovery. An episode that
	// spans a reload counts at least what each pool told.
	Failures int

	counted int // failures reported by the pools of earlier generations
}

// Open reports whether the episode is still running.
func (e Episode) Open() bool { return e.End.IsZero() }

// Duration is the episode's length, up to now for an open one.
func (e Episode) Duration(now time.Time) time.Duration {
	if e.Open() {
		return max(now.Sub(e.Start), 0)
	}
	return max(e.End.Sub(e.Start), 0)
}

// Store keeps ended episodes across restarts. Save must not block (it is
// called on a query's goroutine when a live answer ends an episode);
// Recent returns at most n stored episodes, the latest ended last.
type Store interface {
	SaveEpisode(Episode)
	RecentEpisodes(n int) ([]Episode, error)
}

// Options configure a Log.
type Options struct {
	Max   int   // episodes kept in memory; 0 means DefaultMax
	Store Store // nil keeps them in memory only
}

// Log is the episodes of every upstream, safe for concurrent use.
type Log struct {
	max   int
	store Store

	mu   sync.Mutex
	list []Episode // by start, oldest first; at most max
}

// New returns a log holding the store's most recent episodes. A store that
// cannot be read starts the log empty: this is a view, nothing depends on it.
func New(opts Options) *Log {
	l := &Log{max: opts.Max, store: opts.Store}
	if l.max <= 0 {
		l.max = DefaultMax
	}
	if l.store != nil {
		if eps, err := l.store.RecentEpisodes(l.max); err == nil {
			l.list = eps
			slices.SortStableFunc(l.list, func(a, b Episode) int { return a.Start.Compare(b.Start) })
		}
	}
	return l
}

// Began notes that upstream entered backoff at at. When an episode of it
// is open already — it was in backoff when a reload replaced its pool, and
// the new pool's first probe failed too — that episode goes on.
func (l *Log) Began(upstream string, at time.Time, cause, detail string, failures int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := l.openOf(upstream); i >= 0 {
		e := &l.list[i]
		e.counted = e.Failures
		e.Failures += failures
		return
	}
	if len(detail) > maxDetail {
		detail = detail[:maxDetail]
	}
	if detail == cause {
		detail = "" // Explain had nothing to add to the fault class
	}
	l.list = append(l.list, Episode{Upstream: upstream, Start: at, Cause: cause, Detail: detail, Failures: failures})
	l.trim()
}

// Serving notes that upstream serves as of at, ending its open episode if
// it has one; failures is the pool's count for the episode.
func (l *Log) Serving(upstream string, at time.Time, failures int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i := l.openOf(upstream); i >= 0 {
		e := &l.list[i]
		e.Failures = max(e.Failures, e.counted+failures)
		l.end(e, at)
	}
}

// Retain ends, at at, the open episodes of upstreams not in keep: a reload
// removed or disabled them, so nothing will end them otherwise.
func (l *Log) Retain(keep []string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.list {
		if e := &l.list[i]; e.Open() && !slices.Contains(keep, e.Upstream) {
			l.end(e, at)
		}
	}
}

// Close ends every open episode at at (nxdns is stopping: what it observed
// ends there) and stores it.
func (l *Log) Close(at time.Time) {
	l.Retain(nil, at)
}

// List returns a copy of the episodes, oldest first.
func (l *Log) List() []Episode {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// end closes e at at and stores it. Called with l.mu held; Save does not
// block.
func (l *Log) end(e *Episode, at time.Time) {
	e.End = at
	if e.End.Before(e.Start) {
		e.End = e.Start // a clock step backwards: an empty episode, not a negative one
	}
	if l.store != nil {
		l.store.SaveEpisode(*e)
	}
}

// openOf is the index of upstream's open episode, or -1.
func (l *Log) openOf(upstream string) int {
	return slices.IndexFunc(l.list, func(e Episode) bool { return e.Open() && e.Upstream == upstream })
}

// trim drops the oldest ended episodes past max; open ones go last (there
// is at most one per upstream, and a pool has at most 64).
func (l *Log) trim() {
	for len(l.list) > l.max {
		i := slices.IndexFunc(l.list, func(e Episode) bool { return !e.Open() })
		if i < 0 {
			i = 0
		}
		l.list = slices.Delete(l.list, i, i+1)
	}
}
