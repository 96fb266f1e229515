package app

import (
	"net/netip"
	"syscall"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

// The descriptor check (docs/robustness.md, "Descriptors"): with a limit
// of 256 open files, forward-zone lookups answered 1 of 20 — every one
// needs a socket, and the listeners had taken the rest. nxdns cannot size
// its caps to the limit without failing the traffic the caps exist for, so
// at start and at every reload it compares the limit with what the
// configured caps can hold open at once, and says what to raise.
//
// Go (since 1.19; in 1.26 syscall's init) raises the soft RLIMIT_NOFILE to
// one below the hard limit when the process starts — one below on purpose,
// so that it can tell a later prlimit(1) change from its own. raiseNoFile
// raises it only for a runtime that did not (soft further below), leaving
// Go's detection alone, and the check reads the limit after it.

// fdBase covers what is open besides the caps: the listening sockets, the
// history file, the journal's and the log's streams, epoll and netlink
// sockets, a list download or two.
const fdBase = 64

// webConns is the web endpoint's connection cap (internal/web maxConns).
const webConns = 32

// fdNeed is how many descriptors cfg's caps can hold open at once, by
// part, for the warning to name.
func fdNeed(cfg config.Config) (total int, parts map[string]int) {
	families := map[bool]bool{} // is4 → listened on
	for _, group := range [][]string{cfg.DNS.Listen, cfg.TLS.DoTListen, cfg.TLS.DoHListen} {
		for _, l := range group {
			if ap, err := netip.ParseAddrPort(l); err == nil {
				families[ap.Addr().Unmap().Is4()] = true
			}
		}
	}
	parts = map[string]int{
		"base":                fdBase,
		"tcp_dot_doh_clients": len(families) * server.MaxTCPConns,
		"upstream_pool":       len(cfg.EnabledUpstreams()) * upstream.DefaultSlots,
	}
	if len(cfg.ForwardZones) > 0 {
		// A forward-zone exchange holds a socket for its query's time.
		parts["forward_zone_queries"] = len(families) * server.MaxUDPInFlight
	}
	if cfg.Web.Listen != "" {
		parts["web"] = webConns
	}
	for _, n := range parts {
		total += n
	}
	return total, parts
}

// raiseNoFile sets the soft descriptor limit to the hard one unless the
// runtime already brought it there (or to one below), and returns the
// limit in force.
func raiseNoFile() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Max > 0 && lim.Cur < lim.Max-1 {
		raised := lim
		raised.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
	}
	return lim.Cur, nil
}

// checkDescriptors logs a warning when the descriptor limit is below what
// cfg's caps can hold open.
func checkDescriptors(cfg config.Config, log *zap.Logger) {
	limit, err := raiseNoFile()
	if err != nil {
		log.Warn("descriptor limit unknown", zap.Error(err))
		return
	}
	need, parts := fdNeed(cfg)
	if limit >= uint64(need) {
		return
	}
	fields := []zap.Field{zap.Uint64("limit", limit), zap.Int("caps_need", need)}
	for _, k := range []string{"base", "tcp_dot_doh_clients", "forward_zone_queries", "upstream_pool", "web"} {
		if n, ok := parts[k]; ok {
			fields = append(fields, zap.Int(k, n))
		}
	}
	log.Warn("the open-file limit is below what the configured caps can hold open: under load, connections and forward-zone lookups will fail for lack of descriptors; raise it (systemd: LimitNOFILE= in the unit; a shell: ulimit -n) to at least caps_need", fields...)
}
