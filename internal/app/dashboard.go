package app

import (
	"net/netip"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/dashboard"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/metrics"
	"github.com/nxdns/nxdns/internal/upstream"
	"github.com/nxdns/nxdns/internal/web"

	"go.uber.org/zap"
)

// loadWebPassword reads web.password_file; nil without one. An unreadable
// file or one without a hash fails a reload (the running password stays) and
// locks the dashboard at start (startPassword): serving the dashboard
// without the login the operator asked for is not an option, and neither is
// a LAN without DNS.
func loadWebPassword(w config.Web) ([]byte, error) {
	if w.PasswordFile == "" {
		return nil, nil
	}
	return web.LoadPasswordFile(w.PasswordFile)
}

// lockedHash stands in at start for a web.password_file that cannot be
// read: it is no bcrypt hash, so no password matches it and the dashboard
// and private API stay behind a login nobody can pass, while DNS, /metrics
// and /api/health serve as usual. A web setting must never take the LAN's
// DNS down (a reload with such a file is rejected instead, and the running
// password stays).
var lockedHash = []byte("locked: web.password_file could not be read")

// startPassword is web.password_file's hash at start, or lockedHash (logged,
// and a problem in /api/health) when the file cannot be read.
func (a *App) startPassword(w config.Web) []byte {
	hash, err := loadWebPassword(w)
	if err != nil {
		a.log.Error("dashboard locked: fix web.password_file and reload", zap.Error(err))
		a.webProblem.Store("dashboard locked: " + err.Error())
		return lockedHash
	}
	return hash
}

// newDashboard is the UI and API over the App's history, filter and cache
// and the current generation's pool and client names.
func (a *App) newDashboard() *dashboard.Dashboard {
	return dashboard.New(dashboard.Deps{
		History: a.history,
		Layer: func() dashboard.LayerInfo { // layer.go
			st, file, eff := a.layerInfo()
			return dashboard.LayerInfo{State: st, File: file, Effective: eff}
		},
		Pool: func() upstream.Snapshot { return a.gen.Load().pool.Snapshot() },
		StaticClients: func() map[string]string {
			names := map[string]string{}
			for addr, name := range a.gen.Load().cfg.ClientNames() {
				names[addr.String()] = name
			}
			return names
		},
		Filter:      a.filter.Snapshot,
		Allowed:     a.filter.Allowed,
		Blocked:     a.filter.BlockedNames,
		PausedUntil: a.filter.PausedUntil,
		Health:      a.health,
		FilterNow: func(client netip.Addr) filter.Decision {
			// An invalid name: only the client's group and pause are read.
			return a.gen.Load().filter.Check("nxdns.invalid", client, "", time.Now())
		},
		Cache:    a.cache.Snapshot,
		Episodes: a.episodes.List,
		Devices:  a.devices.List,
		Groups:   func() []filter.GroupSwitches { return a.filter.Groups(a.gen.Load().filter) },
		Services: a.filter.Services,
		Tokens:   a.tokens,
		Peers:    a.peerStatus,
		// The DNSSEC page and banner (docs/dnssec.md).
		DNSSECBogus: func() []dnssec.Episode { return a.dnssec.Snapshot().Recent },
		NTAs:        a.filter.NTAs,
	})
}

// addDashboard puts the login and the dashboard's routes on s.
func (a *App) addDashboard(s *web.Server) {
	s.SetPassword(a.webHash)
	s.SetHostnames(a.webHosts)
	a.dash.Register(s)
}

// tokenCounts are the API tokens' request counts for /metrics.
func (a *App) tokenCounts() []metrics.TokenCount {
	var out []metrics.TokenCount
	for _, c := range a.tokens.Counts() {
		out = append(out, metrics.TokenCount{Name: c.Name, Result: c.Result, N: c.N})
	}
	return out
}
