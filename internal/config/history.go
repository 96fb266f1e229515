package config

import (
	"net/netip"
	"path/filepath"
	"time"
)

// History is the query history kept for the dashboard and the API
// (docs/design.md#history): where it is stored and the budgets that bound it.
type History struct {
	// Path is the store's file; "" keeps the history in memory only (lost
	// on restart, bounded by MaxBytes all the same). The NixOS module puts
	// it in the state directory.
	Path         string `toml:"path"`
	MaxBytes     int64  `toml:"max_bytes"`     // the store never grows past this many bytes; oldest rows go first
	MaxDays      int    `toml:"max_days"`      // rows and buckets older than this many days are deleted
	FlushSeconds int    `toml:"flush_seconds"` // one write transaction per interval; a power cut loses at most one
}

// History bounds (docs/reference/configuration.md).
const (
	minHistoryBytes = 1 << 20  // 1 MiB: a few thousand queries, enough to see what just happened
	maxHistoryBytes = 64 << 30 // 64 GiB: beyond any household's need, and past a 32-bit int (MaxBytes is an int64)
	maxHistoryDays  = 366
	// maxFlushSeconds: an hour between writes already risks an hour of
	// history on a power cut; longer is never what an operator means.
	maxFlushSeconds = 3600
)

func defaultHistory() History {
	return History{MaxBytes: 256 << 20, MaxDays: 30, FlushSeconds: 60}
}

// MaxAge is MaxDays as a duration.
func (h History) MaxAge() time.Duration { return time.Duration(h.MaxDays) * 24 * time.Hour }

// FlushInterval is FlushSeconds as a duration.
func (h History) FlushInterval() time.Duration { return time.Duration(h.FlushSeconds) * time.Second }

func checkHistory(ps *Problems, h History) {
	if h.Path != "" && !filepath.IsAbs(h.Path) {
		// A relative path would depend on the service's working directory.
		ps.add("history.path", CodeNotAbsolute, "%q: want an absolute path, e.g. /var/lib/nxdns/history.db", h.Path)
	}
	checkRange(ps, "history.max_bytes", h.MaxBytes, minHistoryBytes, maxHistoryBytes)
	checkRange(ps, "history.max_days", h.MaxDays, 1, maxHistoryDays)
	checkRange(ps, "history.flush_seconds", h.FlushSeconds, 1, maxFlushSeconds)
}

// checkWebAuth enforces docs/design.md#web-auth: history is private data, never served
// without a password on a non-loopback address. The password file itself is
// read when the web endpoint starts (a credential may exist only in the
// service's runtime directory, not where `nxdns check` runs).
func checkWebAuth(ps *Problems, w Web) {
	if w.PasswordFile != "" && !filepath.IsAbs(w.PasswordFile) {
		ps.add("web.password_file", CodeNotAbsolute, "%q: want an absolute path, e.g. /run/credentials/nxdns.service/web-password", w.PasswordFile)
	}
	if w.PasswordFile != "" {
		return
	}
	if ap, ok := w.Addr(); ok && !ap.Addr().IsLoopback() {
		ps.add("web.listen", CodePasswordRequired,
			"%s is reachable from other hosts: set web.password_file (a hash from nxdns hash-password) or listen on 127.0.0.1", w.Listen)
	}
	if ap, err := netip.ParseAddrPort(w.TLSListen); err == nil && !ap.Addr().IsLoopback() {
		ps.add("web.tls_listen", CodePasswordRequired,
			"%s is reachable from other hosts: set web.password_file (a hash from nxdns hash-password)", w.TLSListen)
	}
}
