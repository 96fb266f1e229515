// Package dashboard is nxdns's web UI and its JSON API
// (docs/design.md#dashboard): the overview, the query log, clients, upstreams, the
// filter lists and the cache, read from the history, the serving pool, the
// filter engine and the cache. Pages are rendered on the server with
// html/template (every name a LAN client sent is escaped) from files
// embedded in the binary, with a little hand-written JavaScript for the
// actions; there is no build step, no Node and no CDN (docs/dashboard.md).
//
// Every route is registered through web.Server.Handle as Private, so the
// login of internal/web guards it, or the loopback-only rule without a
// password.
package dashboard

import (
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/peers"
	"github.com/nxdns/nxdns/internal/upstream"
	"github.com/nxdns/nxdns/internal/web"
)

// Deps are what the dashboard reads. Functions rather than values because
// a reload replaces the pool and the static client names.
type Deps struct {
	History       *history.History          // not nil
	Pool          func() upstream.Snapshot  // nil leaves the upstreams empty
	StaticClients func() map[string]string  // address → [[clients]] name; may be nil
	Now           func() time.Time          // nil means time.Now
	Filter        func() filter.Snapshot    // the lists' state; nil: no lists page data
	Allowed       func() []string           // names allowed from the dashboard; may be nil
	Cache         func() cache.Snapshot     // the cache's counters; nil: no cache page data
	Episodes      func() []episodes.Episode // the upstreams' backoff episodes, oldest first; may be nil
	// Devices lists the devices seen (internal/devices), for the devices
	// page; nil: the page says none are known.
	Devices     func() []devices.Device
	Health      func() web.Health        // /api/health's view, for the status banner; may be nil
	Blocked     func() []string          // names blocked from the dashboard; may be nil
	PausedUntil func() (time.Time, bool) // filtering paused for everyone until; may be nil
	// FilterNow is what the filter does for a client now (its group, a
	// pause), for the client page; may be nil.
	FilterNow func(client netip.Addr) filter.Decision
	// Groups and Services are the groups' switches and the catalogue
	// (groups.go); nil: the groups page says there is nothing to switch.
	Groups   func() []filter.GroupSwitches
	Services func() filter.ServicesAnswer
	Tokens   *web.Tokens               // the API tokens (tokens.go); nil: the page says they are off
	Peers    func() []peers.PeerStatus // the [[peers]] and whether each is in sync; may be nil
	// DNSSECBogus is the last bogus verdicts, newest last, and NTAs the
	// negative trust anchors set from the dashboard, for the DNSSEC page
	// and the banner (docs/dnssec.md); either may be nil.
	DNSSECBogus func() []dnssec.Episode
	NTAs        func() []filter.NTA
	// Layer is the dashboard's configuration layer and the configurations
	// it sits between (manage.go); nil: the manage page says it is off.
	Layer func() LayerInfo
}

// Dashboard serves the pages and the API.
type Dashboard struct {
	deps    Deps
	exports chan struct{} // a slot per export running (export.go)
}

// New returns the dashboard over deps.
func New(deps Deps) *Dashboard {
	return &Dashboard{deps: deps, exports: make(chan struct{}, maxExports)}
}

func (d *Dashboard) now() time.Time {
	if d.deps.Now != nil {
		return d.deps.Now()
	}
	return time.Now()
}

// Routes are the API's routes, for Register and the OpenAPI test.
func (d *Dashboard) apiRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET /api/overview":       d.apiOverview,
		"GET /api/queries":        d.apiQueries,
		"GET /api/clients":        d.apiClients,
		"GET /api/upstreams":      d.apiUpstreams,
		"GET /api/queries/export": d.apiExport,
	}
}

// Register adds the API and the pages to s, all Private.
func (d *Dashboard) Register(s *web.Server) {
	for pattern, h := range d.apiRoutes() {
		s.Handle(pattern, h, web.Private)
	}
	for pattern, h := range d.pageRoutes() {
		s.Handle(pattern, h, web.Private)
	}
	d.registerTokens(s)
	s.Handle("GET /peers", http.HandlerFunc(d.pagePeers), web.Private)
	s.Handle("GET /manage", http.HandlerFunc(d.pageManage), web.Private)
	s.Handle("GET /static/", staticHandler(), web.Public)
}

func typeName(t uint16) string {
	if s, ok := dns.TypeToString[t]; ok {
		return s
	}
	return "TYPE" + strconv.Itoa(int(t))
}

func className(c uint16) string {
	if s, ok := dns.ClassToString[c]; ok {
		return s
	}
	return "CLASS" + strconv.Itoa(int(c))
}

func itoa(n int) string { return strconv.Itoa(n) }

// pagePeers shows each [[peers]] peer and whether it is in sync
// (docs/how-to/two-pis.md).
func (d *Dashboard) pagePeers(w http.ResponseWriter, r *http.Request) {
	var ps []peers.PeerStatus
	if d.deps.Peers != nil {
		ps = d.deps.Peers()
	}
	d.render(w, r, "peers", "Peers", http.StatusOK, map[string]any{"Peers": ps})
}
