package app

import (
	"sync/atomic"
	"time"

	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/upstream"
)

// poolHealth carries one generation's pool transitions into the App's
// episode log, which outlives the pool (docs/design.md#dashboard: upstreams, backoff
// episodes). Once a reload retires the generation it stops: the old pool
// still answers the queries that started on it while it drains, and a
// failure there must not open an episode the new pool, already serving,
// would never end.
type poolHealth struct {
	log     *episodes.Log
	retired atomic.Bool
}

func newPoolHealth(log *episodes.Log) *poolHealth {
	if log == nil {
		return nil // a generation built alone (tests, nxdns check)
	}
	return &poolHealth{log: log}
}

// observer is h as the pool's observer; nil (no observer) for a nil h.
func (h *poolHealth) observer() upstream.HealthObserver {
	if h == nil {
		return nil
	}
	return h
}

// BackoffChanged implements upstream.HealthObserver.
func (h *poolHealth) BackoffChanged(ev upstream.BackoffEvent) {
	if h.retired.Load() {
		return
	}
	if ev.Backoff {
		h.log.Began(ev.Upstream, ev.At, ev.Cause.Error(), ev.Detail, ev.Failures)
		return
	}
	h.log.Serving(ev.Upstream, ev.At, ev.Failures)
}

// followEpisodes hands the episode log from the retired generation to the
// new one, whose pool has not started yet: the old pool's transitions stop
// counting, and an episode of an upstream the new configuration no longer
// has ends now (nothing else would end it). An upstream in both goes on:
// the new pool's first probe ends its episode, or continues it.
func (a *App) followEpisodes(old, next *generation) {
	if old.health != nil {
		old.health.retired.Store(true)
	}
	var keep []string
	for _, u := range next.pool.Snapshot().Upstreams {
		keep = append(keep, u.URL)
	}
	a.episodes.Retain(keep, time.Now())
}
