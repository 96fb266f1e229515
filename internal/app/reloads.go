package app

import (
	"time"

	"github.com/nxdns/nxdns/internal/metrics"
)

// The configuration's life for /metrics (SPEC §9: config reloads; issue 16
// finding 19): reload outcomes, and the generation whose counters the
// upstream and zone series show. Guarded by statMu, not a.mu, so a scrape
// never waits behind a reload.

// recordReload counts one reload attempt; err nil means it was applied.
func (a *App) recordReload(err error) {
	a.statMu.Lock()
	defer a.statMu.Unlock()
	if err != nil {
		a.stat.ReloadsFailed++
		a.stat.LastFailed = true
		return
	}
	a.stat.ReloadsOK++
	a.stat.LastFailed = false
	a.newGenerationLocked()
}

// recordGeneration notes a generation built without a reload (the clock's
// re-probe): its counters restart too, and the generation gauge says so.
func (a *App) recordGeneration() {
	a.statMu.Lock()
	defer a.statMu.Unlock()
	a.newGenerationLocked()
}

func (a *App) newGenerationLocked() {
	a.stat.Generation++
	a.stat.LoadedAt = time.Now()
}

// configState is the scrape's copy.
func (a *App) configState() metrics.ConfigState {
	a.statMu.Lock()
	defer a.statMu.Unlock()
	return a.stat
}
