package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/metrics"
)

// The configuration's life for /metrics (docs/design.md#metrics: config reloads; issue 16
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
		a.reloadErr = firstLine(err.Error())
		return
	}
	a.stat.ReloadsOK++
	a.stat.LastFailed = false
	a.reloadErr = ""
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

// reloadProblem is /api/health's word on the last reload: "" unless it
// failed, then why, until a reload succeeds (docs/reference/http.md). The
// file on disk is then not what nxdns runs, which an operator must hear
// about even when `systemctl reload` was not how the reload came.
func (a *App) reloadProblem() string {
	a.statMu.Lock()
	defer a.statMu.Unlock()
	if !a.stat.LastFailed {
		return ""
	}
	return "config: the last reload failed, the previous configuration serves: " + a.reloadErr
}

// firstLine is s up to its first newline, with a count of the lines cut:
// a file's problems are one a line, and a health line holds one.
func firstLine(s string) string {
	first, rest, ok := strings.Cut(s, "\n")
	if !ok {
		return s
	}
	return fmt.Sprintf("%s (and %d more problems: see the log)", first, strings.Count(rest, "\n")+1)
}
