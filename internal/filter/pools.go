package filter

import (
	"net/netip"
	"time"

	"github.com/nxdns/nxdns/internal/query"
)

var _ query.Pooler = (*Stage)(nil)

// Pool is the group whose own upstreams serve a client now (docs/filter.md
// "Per-group upstreams"): the first of the client's own groups, in file
// order, that is on now (its schedule) and names upstreams; otherwise
// `default`, when it is on now and names upstreams; otherwise "", the main
// pool. A group's upstreams follow its schedule as its lists do: outside
// its windows the client is served as if it were not in the group.
func (p *Policy) Pool(client netip.Addr, name string, now time.Time) string {
	return p.pool(client, name, false, now)
}

// pool is Pool; newDev puts the client in the new_devices group too, as
// for its lists (newdevices.go).
func (p *Policy) pool(client netip.Addr, name string, newDev bool, now time.Time) string {
	if !p.pooled {
		return ""
	}
	client = client.Unmap()
	local := now.In(p.loc)
	for i := range p.groups {
		g := &p.groups[i]
		if i != p.fallback && g.pooled && (g.has(client, name) || newDev && i == p.newGroup) && g.activeAt(local) {
			return g.name
		}
	}
	if p.fallback >= 0 {
		if g := &p.groups[p.fallback]; g.pooled && g.activeAt(local) {
			return g.name
		}
	}
	return ""
}

// PoolOf is the pool of the query of ev (query.Pooler): Policy.Pool for
// its client at its arrival, a new device in the new_devices group. It
// costs nothing when no group has upstreams.
func (s *Stage) PoolOf(ev *query.Event) string {
	if !s.policy.pooled {
		return ""
	}
	return s.policy.pool(ev.Client, ev.ClientName, ev.NewDevice, s.e.timeOf(ev))
}

// DashboardAllows reports whether name, or a name above it, was allowed
// from the dashboard (POST /api/filter/allow). Rebinding protection asks
// too (docs/protocol.md "Rebinding protection"): the operator's one allow
// button makes a name work whatever stood in its way.
func (e *Engine) DashboardAllows(name string) bool {
	_, ok := e.allow.match(normal(name))
	return ok
}
