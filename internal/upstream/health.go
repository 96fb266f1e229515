package upstream

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// Health and backoff (docs/design.md#pool-health). An entry counts consecutive recorded
// failures; at backoffThreshold it enters backoff, and the prober (probe.go)
// brings it back. Entering and leaving backoff are episodes with one log line
// each; nothing here logs per query.
const (
	// backoffThreshold is small so a dead upstream leaves service after a few
	// failed queries, and above one so a single reset connection does not
	// take a healthy upstream out.
	backoffThreshold = 3

	// backoffFirst is the first probe interval of an episode: long enough that
	// a flapping upstream is not hammered, short enough that a restart of the
	// upstream is noticed within seconds.
	backoffFirst = 2 * time.Second

	// backoffMax caps the doubling, so an upstream that was down for an hour
	// is back in service about a minute after it recovers.
	backoffMax = time.Minute
)

// backoffInterval is the wait before probe number step (from 0) of a backoff
// episode: backoffFirst doubled per step, capped at backoffMax, then drawn
// uniformly from its upper half ("equal jitter") with r in [0, 1). The jitter
// keeps entries that failed together, and households behind one resolver,
// from probing in lockstep; the lower bound keeps the growth.
func backoffInterval(step int, r float64) time.Duration {
	d := backoffMax
	if step < 16 { // beyond that the shift only matters for overflow
		if s := backoffFirst << step; s < backoffMax {
			d = s
		}
	}
	return d/2 + time.Duration(r*float64(d/2))
}

// BackoffInterval is backoffInterval with fresh jitter, for the other
// components that probe a dead peer on the same schedule (forward-zone
// resolvers, docs/design.md#pool-probes): one schedule, written once.
func BackoffInterval(step int) time.Duration { return backoffInterval(step, rand.Float64()) }

// health is one entry's recorded outcomes. The fields admission reads on
// every query are atomics; the mutex is taken only when the state may change,
// never by a success on a healthy entry.
type health struct {
	backoff atomic.Bool  // in backoff: only the last-resort pass and the prober use the entry
	fails   atomic.Int32 // consecutive recorded failures; a success resets it

	mu    sync.Mutex // serialises transitions, so each episode logs one line each way
	since time.Time  // when the current backoff episode began

	kick chan struct{} // capacity 1: tells the prober an episode began
	// verify (capacity 1) asks the prober for one probe of a serving entry:
	// a query was refused, and only the probe can say whether the upstream
	// refuses us or only that query (docs/upstream-pool.md "Health").
	verify chan struct{}
}

// askVerify asks e's prober to check e with one probe, unless a request is
// pending already. It never blocks: a refused query goes on failing over
// while the probe runs.
func (e *entry) askVerify() {
	select {
	case e.health.verify <- struct{}{}:
	default:
	}
}

// recordSuccess clears the failures and ends a backoff episode with one info
// line giving the outage's length and failure count.
func (p *Pool) recordSuccess(e *entry) {
	h := &e.health
	if h.fails.Load() == 0 && !h.backoff.Load() {
		return // the common case: nothing to clear, no lock
	}
	h.mu.Lock()
	n := h.fails.Swap(0)
	recovered := h.backoff.Swap(false)
	since := h.since
	if recovered {
		p.observe(BackoffEvent{Upstream: e.url, At: time.Now(), Failures: int(n)})
	}
	h.mu.Unlock()
	if !recovered {
		return
	}
	p.log.Info("upstream recovered",
		zap.Int("index", e.index), zap.String("upstream", e.url),
		zap.Duration("outage", time.Since(since)), zap.Int32("failures", n))
	p.board.notify() // waiters may now use it outside the last-resort pass
}

// recordFailure counts one failure. The one that reaches backoffThreshold,
// or any failure when force is set (a failed start-up probe), begins a
// backoff episode with one warn line naming the cause; failures during the
// episode only count.
func (p *Pool) recordFailure(e *entry, cause error, force bool) {
	h := &e.health
	h.mu.Lock()
	n := h.fails.Add(1)
	if h.backoff.Load() || (n < backoffThreshold && !force) {
		h.mu.Unlock()
		return
	}
	h.since = time.Now()
	h.backoff.Store(true)
	e.backoffs.Add(1)
	p.observe(BackoffEvent{Upstream: e.url, At: h.since, Backoff: true,
		Cause: Classify(cause), Detail: Explain(cause), Failures: int(n)})
	h.mu.Unlock()
	p.log.Warn("upstream entering backoff",
		zap.Int("index", e.index), zap.String("upstream", e.url),
		zap.Int32("failures", n), zap.String("cause", e.redactCause(cause)))
	select {
	case h.kick <- struct{}{}:
	default: // the prober has a kick pending already
	}
	p.board.notify() // waiters stop counting on it
}

// announceServing tells the observer that e serves, after its first probe
// succeeded: an observer that outlives this pool (the App's episode log)
// may hold an episode of the same upstream from the previous generation,
// which this generation's entry, starting healthy, would never end. Under
// the health lock, and only while e is not in backoff, so it can never
// follow (and end) an episode that began after the probe.
func (p *Pool) announceServing(e *entry) {
	h := &e.health
	h.mu.Lock()
	if !h.backoff.Load() {
		p.observe(BackoffEvent{Upstream: e.url, At: time.Now(), Failures: int(h.fails.Load())})
	}
	h.mu.Unlock()
}

// BackoffEvent is one health transition of a pool entry
// (the episodes of docs/design.md#pool-health), for a HealthObserver.
type BackoffEvent struct {
	Upstream string    // the entry's redacted URL
	At       time.Time // when it happened
	// Backoff is true when the entry entered backoff, false when it serves:
	// it recovered, or its first probe found it serving.
	Backoff bool
	Cause   Kind   // the fault class of the failure that began the episode (Backoff only)
	Detail  string // that failure in words (Explain: no URL in it); Backoff only
	// Failures is how many failures were recorded in a row: those that
	// began the episode, or at the end every failed attempt and probe of it.
	Failures int
}

// HealthObserver hears a pool's health transitions: the App keeps a log
// of backoff episodes across reloads with it (internal/episodes). The pool
// calls it with the entry's health lock held, so one entry's events arrive
// in the order they happened; it runs on a query's goroutine too, so it
// must return at once and never call back into the pool.
type HealthObserver interface {
	BackoffChanged(BackoffEvent)
}

func (p *Pool) observe(ev BackoffEvent) {
	if p.observer != nil {
		p.observer.BackoffChanged(ev)
	}
}

// redactCause is the cause's text through the endpoint's Scrub. A transport
// should not put the URL's secret parts in its errors, but a wrapped
// *url.Error prints the request URL, and a token in a journal cannot be
// taken back.
func (e *entry) redactCause(err error) string {
	if err == nil {
		return ""
	}
	return e.endpoint.Scrub(err.Error())
}
