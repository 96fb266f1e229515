package app

import (
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/history"
)

// openHistory starts the query history of cfg (SPEC §9). It never fails:
// a store that cannot be opened keeps the history in memory and says so
// in /api/health, and DNS starts either way.
func openHistory(cfg config.History, log *zap.Logger) *history.History {
	return history.Open(history.Options{
		Path:     cfg.Path,
		MaxBytes: int64(cfg.MaxBytes),
		MaxAge:   cfg.MaxAge(),
		Flush:    cfg.FlushInterval(),
		Logger:   log,
	})
}

// historyStore names where the history lives, for /api/health.
func (a *App) historyStore() string {
	if a.historyCfg.Path == "" || a.history.InMemory() {
		return "memory"
	}
	return "file"
}

// noteHistoryChange logs that a reload's [history] change waits for a
// restart: the store is one file held open across reloads, and reopening it
// mid-flight would risk the interval being written.
func (a *App) noteHistoryChange(cfg config.History) {
	if cfg != a.historyCfg {
		a.log.Warn("[history] changed; the running history keeps its settings until nxdns restarts",
			zap.String("path", a.historyCfg.Path), zap.String("new_path", cfg.Path))
	}
}
