package app

import (
	"context"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/clock"
)

// The boot path of a Pi without a real-time clock (docs/design.md#boot-path): nxdns starts
// at once with whatever time the system has. Until NTP sets the clock, the
// upstreams' certificates may look "not yet valid" and the upstreams go into
// backoff; nxdns says why (a warn line, /api/health's clock) and, when the
// clock becomes synchronized, applies the running configuration again, which
// probes every upstream at once (the load-time probe of docs/design.md#pool-probes) instead of
// waiting for each one's next backoff probe, up to a minute away.

// unsyncedMsg is logged at start and whenever the clock is found
// unsynchronized.
const unsyncedMsg = "system clock not synchronized: upstream certificates may be refused as not yet valid until NTP sets it; nxdns probes the upstreams again once it does"

// watchClock logs the clock's state at start and follows its changes until
// Shutdown.
func (a *App) watchClock() {
	if r := a.clock.Current(); r.State == clock.Unsynchronized {
		a.log.Warn(unsyncedMsg, zap.String("source", r.Source))
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.stopClock = cancel
	a.clockDone.Go(func() { a.clock.Run(ctx, a.clockChanged) })
}

func (a *App) clockChanged(old, now clock.Reading) {
	switch {
	case now.State == clock.Unsynchronized:
		a.log.Warn(unsyncedMsg, zap.String("source", now.Source))
	case now.State == clock.Synchronized && old.State == clock.Unsynchronized:
		a.log.Info("system clock synchronized", zap.String("source", now.Source))
		a.dnssecClockChanged(now)
		a.reprobe()
	}
}

// reprobe applies the running configuration again if any upstream is in
// backoff, so each is probed now with the corrected clock.
func (a *App) reprobe() {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.gen.Load()
	inBackoff := 0
	for _, u := range g.pool.Snapshot().Upstreams {
		if u.InBackoff {
			inBackoff++
		}
	}
	if inBackoff == 0 {
		return
	}
	a.log.Info("probing the upstreams again after the clock was set", zap.Int("in_backoff", inBackoff))
	if err := a.reloadLocked(g.cfg); err != nil {
		a.log.Warn("could not probe the upstreams again; they return at their next backoff probe", zap.Error(err))
		return
	}
	a.recordGeneration() // a new pool: its counters start at zero
}
