package app

import (
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/dashboard"
	"github.com/nxdns/nxdns/internal/upstream"
	"github.com/nxdns/nxdns/internal/web"
)

// loadWebPassword reads web.password_file; nil without one. An unreadable
// file or one without a hash fails the start or the reload: serving the
// dashboard without the login the operator asked for is not an option.
func loadWebPassword(w config.Web) ([]byte, error) {
	if w.PasswordFile == "" {
		return nil, nil
	}
	return web.LoadPasswordFile(w.PasswordFile)
}

// newDashboard is the UI and API over the App's history, filter and cache
// and the current generation's pool and client names.
func (a *App) newDashboard() *dashboard.Dashboard {
	return dashboard.New(dashboard.Deps{
		History: a.history,
		Pool:    func() upstream.Snapshot { return a.gen.Load().pool.Snapshot() },
		StaticClients: func() map[string]string {
			names := map[string]string{}
			for addr, name := range a.gen.Load().cfg.ClientNames() {
				names[addr.String()] = name
			}
			return names
		},
		Filter:  a.filter.Snapshot,
		Allowed: a.filter.Allowed,
		Cache:   a.cache.Snapshot,
	})
}

// addDashboard puts the login and the dashboard's routes on s.
func (a *App) addDashboard(s *web.Server) {
	s.SetPassword(a.webHash)
	a.dash.Register(s)
}
