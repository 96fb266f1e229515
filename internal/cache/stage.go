package cache

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/workers"
)

// Serve-stale timing (docs/design.md#serve-stale, RFC 8767).
const (
	// maxStalePoint is RFC 8767 §5's client-response timer: 1.8 s, before a
	// stub's first retry.
	maxStalePoint = 1800 * time.Millisecond
	// staleMargin is what relaying, packing and writing the stale answer may
	// take after the stale point, so it still lands before Request.Deadline.
	staleMargin = 100 * time.Millisecond
	// failureRecheck is RFC 8767 §4's failure-recheck timer: after a failed
	// refresh, stale answers go out at once for this long before the next
	// refresh is tried, so an outage costs each client no wait.
	failureRecheck = 30 * time.Second
)

// Stage is the cache's link of the stage chain (docs/design.md#stage-chain) for one
// configuration generation. The entries live in the Cache, which survives
// reloads; the Stage owns only the exchanges it started (coalesced
// queries, prefetches, refreshes after a stale answer), which Close ends.
type Stage struct {
	c       *Cache
	flights flights
	ctx     context.Context // the background exchanges'; cancelled by Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup   // the exchanges running
	work    *workers.Workers // the goroutines they run on, stacks kept

	prefetching atomic.Int32 // prefetches in flight, at most maxPrefetches
}

var _ query.Stage = (*Stage)(nil)

// Stage returns a new link over c for one generation of the chain.
func (c *Cache) Stage() *Stage {
	ctx, cancel := context.WithCancel(context.Background())
	return &Stage{c: c, ctx: ctx, cancel: cancel, work: workers.New()}
}

// Close cancels the exchanges the stage started and waits for them and for
// the goroutines they ran on.
func (s *Stage) Close() {
	s.cancel()
	s.wg.Wait()
	s.work.Stop()
	s.work.Wait()
}

// Answer answers from a fresh entry, or passes the query on, sharing an
// identical query's exchange in flight, and falls back to an expired entry
// when no fresh answer comes by the stale point.
func (s *Stage) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	c := s.c
	st, set := c.state()
	if st == nil {
		return next.Answer(ctx, r)
	}
	k := keyOf(r.Msg)
	k.pool = r.Event.Pool
	now := c.now()
	ns := now.UnixNano()
	e := st.get(k)
	switch {
	case e == nil:
	case e.fresh(ns):
		c.hits.Add(1)
		r.Event.Cache, r.Event.Source = query.CacheHit, query.SourceCache
		if set.prefetch && e.nearExpiry(ns) && ns >= e.retryAt.Load() {
			s.prefetch(k, e, r, next)
		}
		v := e.renderView(ns)
		if r.Wire != nil {
			e.keepWire(r.Wire, v.msg, v.age)
		}
		return v.msg, nil
	case !e.usableStale(ns, set.staleMaxAge):
		st.remove(k, e) // past stale_max_age: no use to anyone
		e = nil
	case ns < e.retryAt.Load():
		return s.serveStale(r, e), nil // RFC 8767 §4: a refresh failed moments ago
	}
	return s.resolve(ctx, r, next, k, e)
}

// resolve waits for k's exchange (its own or one in flight) and, with a
// stale entry at hand, for no longer than the stale point.
func (s *Stage) resolve(ctx context.Context, r *query.Request, next query.Handler, k key, stale *entry) (*dns.Msg, error) {
	fl, leader := s.flights.join(k)
	switch {
	case leader && stale == nil && r.Lasting:
		// Nothing to serve at a stale point, and the query's ctx ends only
		// with the server, as every follower's does: the exchange runs here,
		// without a hand-off to a worker and back (docs/cache.md "Coalescing and prefetch").
		r.Event.Cache = query.CacheMiss
		s.exchange(ctx, k, fl, s.request(fl, r), next, nil, s.c.flushes.seq())
	case leader:
		s.start(k, fl, r, next, stale)
		r.Event.Cache = query.CacheMiss
	default:
		s.c.coalesced.Add(1)
		r.Event.Cache = query.CacheCoalesced
	}
	var point <-chan time.Time
	if stale != nil {
		// The deadline is the query's, on the real clock, whatever the
		// cache's clock says about entry ages.
		t := time.NewTimer(stalePoint(r.Deadline, time.Now()))
		defer t.Stop()
		point = t.C
	}
	select {
	case <-fl.done:
		if stale != nil && failed(fl.msg, fl.err) {
			r.Event.Tried = fl.tried // the log says whom the refresh tried
			return s.serveStale(r, stale), nil
		}
		s.c.misses.Add(1)
		r.Event.Source, r.Event.Upstream, r.Event.Tried = fl.source, fl.upstream, fl.tried
		return fl.msg, fl.err
	case <-point:
		return s.serveStale(r, stale), nil // the exchange goes on and refreshes the entry
	case <-ctx.Done():
		s.c.misses.Add(1)
		return nil, ctx.Err()
	}
}

// stalePoint is how long a query with a stale entry waits for a fresh
// answer: the earlier of 1.8 s and the query's budget less the margin
// (docs/design.md#serve-stale), so the stale answer always lands before the client gives up.
func stalePoint(deadline, now time.Time) time.Duration {
	return max(min(maxStalePoint, deadline.Sub(now)-staleMargin), 0)
}

// maxPrefetches bounds the prefetches of one stage in flight at once. A
// prefetch is an exchange nobody waits for, started by any hit near expiry:
// unbounded, one client walking through many cached names could run up to
// cache_size of them at once against the upstream slots everyone's queries
// need (32 per upstream, upstream.DefaultSlots). 16 leaves at least half of
// one upstream's slots to queries a client waits for, and is far above a
// household's need: a few prefetches a second, each a round trip of
// milliseconds. A hit that finds the bound reached skips its prefetch (not
// counted as one); the entry stays fresh and the next hit near expiry tries
// again, and if none comes it expires into an ordinary miss.
const maxPrefetches = 16

// prefetch refreshes a fresh entry near its expiry in the background, at
// most one exchange per key (a flight in progress is that one) and at most
// maxPrefetches at once.
func (s *Stage) prefetch(k key, e *entry, r *query.Request, next query.Handler) {
	// Add then undo: a racing hit may skip while the count overshoots for an
	// instant, which costs only a prefetch the next hit makes.
	if s.prefetching.Add(1) > maxPrefetches {
		s.prefetching.Add(-1)
		return
	}
	fl, leader := s.flights.join(k)
	if !leader {
		s.prefetching.Add(-1)
		return
	}
	s.c.prefetches.Add(1)
	s.start(k, fl, r, query.HandlerFunc(func(ctx context.Context, req *query.Request) (*dns.Msg, error) {
		defer s.prefetching.Add(-1)
		return next.Answer(ctx, req)
	}), e)
}

// start runs k's exchange on a goroutine of the stage, detached from the
// query that started it: that query's client may give up, the others
// waiting on the flight still get the answer. The exchange spends the
// starting query's budget, as any query does (the pool and the zones bound
// themselves by it). The goroutine is a worker that outlives the exchange:
// a new one per miss would grow its stack through the pool and the TLS
// client every time (docs/performance.md "Where a miss goes").
func (s *Stage) start(k key, fl *flight, r *query.Request, next query.Handler, old *entry) {
	req := s.request(fl, r)
	flushes := s.c.flushes.seq()
	s.wg.Add(1)
	s.work.Run(func() {
		defer s.wg.Done()
		s.exchange(s.ctx, k, fl, req, next, old, flushes)
	})
}

// request is the exchange's own request for fl, made from the query r that
// starts it. The client rides along: the pool counts the exchange in its
// share of the slots (docs/upstream-pool.md "One client's share").
func (s *Stage) request(fl *flight, r *query.Request) *query.Request {
	fl.ev = query.Event{Client: r.Event.Client, Pool: r.Event.Pool}
	fl.req = query.Request{Msg: r.Msg, Deadline: r.Deadline, Event: &fl.ev}
	return &fl.req
}

// exchange runs fl's exchange under ctx, learns its outcome and hands it to
// every query waiting on fl. flushes is the flush log's seq when the
// exchange started (learn).
func (s *Stage) exchange(ctx context.Context, k key, fl *flight, req *query.Request, next query.Handler, old *entry, flushes uint64) {
	msg, err := next.Answer(ctx, req)
	fl.msg, fl.err = msg, err
	fl.source, fl.upstream, fl.tried = req.Event.Source, req.Event.Upstream, req.Event.Tried
	// A cancelled exchange says nothing about the upstream.
	if ctx.Err() == nil && s.ctx.Err() == nil {
		s.c.learn(k, fl, old, flushes)
	}
	s.flights.finish(k, fl)
}

// serveStale answers with an expired entry: TTL 30, EDE 3 (docs/design.md#serve-stale).
func (s *Stage) serveStale(r *query.Request, e *entry) *dns.Msg {
	s.c.stale.Add(1)
	r.Event.Cache, r.Event.Source = query.CacheStale, query.SourceStale
	return e.renderStale()
}

// failed reports whether an exchange's outcome is a failure to resolve
// (RFC 8767 §4): an error, or an answer whose rcode says the upstream could
// not resolve the name. NXDOMAIN is an answer.
func failed(msg *dns.Msg, err error) bool {
	return err != nil || msg == nil || msg.Rcode != dns.RcodeSuccess && msg.Rcode != dns.RcodeNameError
}

// learn records an exchange's outcome: the answer stored, or for a failure
// the failure-recheck timer of the stale entry it would have refreshed. A
// forward zone's failure marks the zone down; its first good answer
// afterwards drops the zone's stale and negative entries (docs/design.md#serve-stale). An
// answer to an exchange started before a flush of its name (flushes is the
// log's seq when it started) goes to its waiters but does not stay: the
// operator flushed because the old answer was wrong, and this one may be it.
func (c *Cache) learn(k key, fl *flight, old *entry, flushes uint64) {
	st, set := c.state()
	if st == nil {
		return
	}
	now := c.now()
	zone := strings.HasPrefix(fl.source, query.ZonePrefix)
	if failed(fl.msg, fl.err) {
		if zone {
			c.zones.down(fl.source)
		}
		if old != nil {
			old.retryAt.Store(now.Add(failureRecheck).UnixNano())
		}
		return
	}
	if zone && c.zones.up(fl.source) {
		c.dropZone(st, fl.source, now.UnixNano())
	}
	e := prepare(fl.msg, k, set.lim, now, fl.upstream, fl.source)
	if e == nil {
		return
	}
	// Every waiter gets the answer as the cache gives it from now on: TTLs
	// clamped, DNSSEC records only for DO. At age 0 that is the entry's own
	// message, which is never modified (query.Handler lets a stage return a
	// message it shares): no copy per miss, and none kept on the entry.
	fl.msg = &e.msg
	if c.flushes.covers(flushes, k.name) {
		return
	}
	if !st.put(k, e) {
		// Too heavy to keep (store.go): the answer it replaces is
		// superseded all the same, and must not be served stale later.
		if old != nil {
			st.remove(k, old)
			c.changes.Add(1)
		}
		return
	}
	c.changes.Add(1)
	if c.flushes.covers(flushes, k.name) { // a flush while storing: see Flush
		st.remove(k, e)
	}
}

// dropZone removes a recovered zone's stale and negative entries.
func (c *Cache) dropZone(st *store, source string, now int64) {
	n := st.removeIf(func(_ key, e *entry) bool {
		return e.source == source && (e.negative || !e.fresh(now))
	})
	if n > 0 {
		c.changes.Add(1)
		c.log.Info("forward zone answering again: dropped its stale and negative cache entries",
			zap.String("zone", strings.TrimPrefix(source, query.ZonePrefix)), zap.Int("entries", n))
	}
}

// zoneHealth is which forward zones failed since their last good answer.
type zoneHealth struct {
	mu      sync.Mutex
	failing map[string]bool // by Event.Source ("zone:lan")
}

func (z *zoneHealth) down(source string) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.failing == nil {
		z.failing = map[string]bool{}
	}
	z.failing[source] = true
}

// up records a good answer and reports whether the zone had been failing.
func (z *zoneHealth) up(source string) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	was := z.failing[source]
	delete(z.failing, source)
	return was
}
