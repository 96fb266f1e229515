package forward

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/sleep"
	"github.com/nxdns/nxdns/internal/upstream"
)

// Forward-zone resolvers are probed the way upstreams are (docs/design.md#pool-probes, last
// paragraph): once at start and on reload, in the background, and on the
// pool's jittered backoff schedule while one is unreachable. A zone has one
// resolver and no failover (docs/design.md#forward-zones), so health changes no routing here: it
// makes a dead router visible — one log line per episode, /api/health and
// /metrics — instead of a silent SERVFAIL for every LAN name.

const (
	// zoneProbeTimeout bounds one probe. A LAN resolver answers in a few
	// milliseconds; one that needs a second is not answering the household
	// either. It matches the upstreams' probe timeout.
	zoneProbeTimeout = time.Second

	// zoneDownThreshold is how many consecutive failed exchanges mark a
	// resolver unreachable, as for an upstream: more than one, so a single
	// lost datagram does not raise an alarm.
	zoneDownThreshold = 3
)

// zoneHealth is one zone resolver's recorded outcomes. Live queries and the
// prober both record; only the prober logs, so each episode gets exactly one
// line each way however many queries fail during it.
type zoneHealth struct {
	down  atomic.Bool  // unreachable: the prober is probing it
	fails atomic.Int32 // consecutive failures; a success resets it

	mu    sync.Mutex // guards since and cause
	since time.Time  // when the current episode began
	cause string     // the failure that began it, in words (upstream.Explain)

	kick chan struct{} // capacity 1: an episode began

	probesOK     atomic.Uint64
	probesFailed atomic.Uint64
}

func newZoneHealth() zoneHealth { return zoneHealth{kick: make(chan struct{}, 1)} }

// success ends an episode (the prober logs the recovery) and clears the
// failures. The common case, nothing to clear, is two atomic loads.
func (h *zoneHealth) success() {
	if h.fails.Load() == 0 && !h.down.Load() {
		return
	}
	h.fails.Store(0)
	h.down.Store(false)
}

// failure counts one failure; the one reaching zoneDownThreshold, or any
// when force is set (a failed start-up probe), begins an episode.
func (h *zoneHealth) failure(cause error, force bool) {
	n := h.fails.Add(1)
	if h.down.Load() || (n < zoneDownThreshold && !force) {
		return
	}
	h.mu.Lock()
	if h.down.Load() {
		h.mu.Unlock()
		return
	}
	h.since = time.Now()
	h.cause = upstream.Explain(cause)
	h.down.Store(true)
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Probe sends the zone's resolver one query for the zone's SOA, bounded by
// zoneProbeTimeout, and reports whether it answered. Any valid response is
// success, NXDOMAIN and REFUSED included: a router that is not authoritative
// for its own reverse zone still shows it is reachable and answering, which
// is what a probe asks. It counts nothing: `nxdns check --probe` calls it
// too, on a table of its own.
func (z *Zone) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeoutCause(ctx, zoneProbeTimeout, upstream.KindPeerTimeout)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(z.name, dns.TypeSOA)
	_, err := z.exchange(ctx, q)
	return err
}

// Start probes every zone's resolver once in the background and keeps
// probing those that become unreachable, until Close. log gets the episode
// lines. A nil or empty table starts nothing.
func (t *Table) Start(log *zap.Logger) {
	if t == nil || len(t.zones) == 0 {
		return
	}
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	for _, z := range t.zones {
		t.wg.Go(func() { z.probeLoop(ctx, log) })
	}
}

// Close stops the probers, waits for them, and closes the encrypted
// resolvers' connections. Safe on a table never started.
func (t *Table) Close() {
	if t == nil {
		return
	}
	if t.stop != nil {
		t.stop()
		t.wg.Wait()
	}
	t.closeClients()
}

// probeLoop probes once, then for each episode logs its start, probes on
// the backoff schedule until the resolver answers (or a live query got an
// answer), and logs the recovery.
func (z *Zone) probeLoop(ctx context.Context, log *zap.Logger) {
	if !z.countedProbe(ctx, true) {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-z.health.kick:
		}
		z.health.mu.Lock()
		since, cause := z.health.since, z.health.cause
		z.health.mu.Unlock()
		log.Warn("forward-zone resolver unreachable",
			zap.String("zone", z.name), zap.String("resolver", z.url), zap.String("cause", cause))
		for step := 0; z.health.down.Load(); step++ {
			if !sleep.For(ctx, upstream.BackoffInterval(step)) {
				return
			}
			if !z.countedProbe(ctx, false) {
				return
			}
		}
		log.Info("forward-zone resolver recovered",
			zap.String("zone", z.name), zap.String("resolver", z.url), zap.Duration("outage", time.Since(since)))
	}
}

// countedProbe probes and records the outcome; false means ctx ended.
func (z *Zone) countedProbe(ctx context.Context, force bool) bool {
	err := z.Probe(ctx)
	switch {
	case err == nil:
		z.health.probesOK.Add(1)
		z.health.success()
	case ctx.Err() != nil:
		return false
	default:
		z.health.probesFailed.Add(1)
		z.health.failure(err, force)
	}
	return true
}
