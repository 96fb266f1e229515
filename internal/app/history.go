package app

import (
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/history"
)

// historyOptions are the history's settings from cfg.
func historyOptions(cfg config.History, log *zap.Logger) history.Options {
	return history.Options{
		Path:     cfg.Path,
		MaxBytes: cfg.MaxBytes,
		MaxAge:   cfg.MaxAge(),
		Flush:    cfg.FlushInterval(),
		Logger:   log,
	}
}

// openHistory starts the query history of cfg (docs/design.md#history). It never fails:
// a store that cannot be opened keeps the history in memory and says so
// in /api/health, and DNS starts either way. check, when set, vets a file
// before this process opens it, at start and at every reload that opens
// one (docs/history.md, "Degraded, never DNS").
func openHistory(cfg config.History, log *zap.Logger, check func(string) error) *history.History {
	opts := historyOptions(cfg, log)
	opts.Precheck = check
	return history.Open(opts)
}

// historyStore names where the history lives, for /api/health.
func (a *App) historyStore() string {
	if a.history.InMemory() {
		return "memory"
	}
	return "file"
}

// reconfigureHistory applies a reload's [history] to the running history
// (history.Reconfigure): budgets and the flush interval in place, a new
// path by flushing to the old store and opening the new one. The history
// object itself stays, so the generations, the dashboard and the episode
// log keep writing to and reading from it. Called with a.mu held.
func (a *App) reconfigureHistory(cfg config.History) {
	// Unchanged, unless a file that did not open is to be tried again.
	if cfg == a.historyCfg && (cfg.Path == "" || !a.history.InMemory()) {
		return
	}
	a.history.Reconfigure(historyOptions(cfg, a.log))
	a.historyCfg = cfg
}

// closeHistory ends the open backoff episodes at shutdown, so they are
// stored, then writes what is buffered and closes the store.
func (a *App) closeHistory() {
	a.episodes.Close(time.Now())
	a.history.Close()
}
