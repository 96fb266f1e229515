package app

import (
	"fmt"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/rebind"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

// groupPool is one group's own upstream pool (docs/filter.md "Per-group
// upstreams"): the same pool type as the main one, so the same deadline,
// admission, health, probes and attribution. Consecutive generations share
// it while the group's upstreams and the budgets stay the same, so a
// reload keeps its health, connections and counters; the last generation
// to let go of it closes it.
type groupPool struct {
	pool *upstream.Pool
	sig  string // what it was built from (poolSignature)
	refs atomic.Int32
}

// release lets go of one generation's share; the last closes the pool.
func (p *groupPool) release() {
	if p.refs.Add(-1) == 0 {
		p.pool.Close()
	}
}

// poolSignature is what a group pool is built from: its upstreams as
// resolved (URL, address, TLS name, CA, priority) and the budgets.
func poolSignature(cfg config.Config, ups []config.UpstreamURL) string {
	s := fmt.Sprint(cfg.Upstream.Attempt(), cfg.Upstream.Total())
	for _, u := range ups {
		s += fmt.Sprintf("|%q %q %q %x %d", u.URL, u.Address, u.TLSName, u.CA, u.Priority)
	}
	return s
}

// buildGroupPools gives g a pool for each group that names upstreams:
// prev's (the running generation's) when nothing it is built from
// changed, otherwise a new one, not yet started. On error the pools taken
// so far stay in g.groups for close.
func (g *generation) buildGroupPools(prev *generation) error {
	for _, grp := range g.cfg.PooledGroups() {
		ups := g.cfg.GroupUpstreams(grp)
		sig := poolSignature(g.cfg, ups)
		if prev != nil {
			if old := prev.groups[grp.Name]; old != nil && old.sig == sig {
				old.refs.Add(1)
				g.groups[grp.Name] = old
				continue
			}
		}
		own := g.cfg
		own.Upstreams = ups
		// Their health is in the log and the metrics (pool label), not in
		// the dashboard's episodes, which name an upstream by URL alone.
		pool, err := buildPool(own, g.log.With(zap.String("group", grp.Name)), 0, nil)
		if err != nil {
			return fmt.Errorf("filter group %s: %w", grp.Name, err)
		}
		gp := &groupPool{pool: pool, sig: sig}
		gp.refs.Store(1)
		g.groups[grp.Name] = gp
	}
	return nil
}

// RouteIn is Route for a query of a group with a pool of its own
// (server.PoolRouter): the forward zones first, as for everyone, then the
// group's pool; a group this generation has no pool for gets the main one.
func (g *generation) RouteIn(qname, pool string) (server.Resolver, string) {
	res, source := g.resolverIn(qname, pool)
	if v := g.validating[res]; v != nil {
		return v, source
	}
	return res, source
}

// resolverIn is RouteIn without validation: what the DNSSEC validator's
// own DS and DNSKEY fetches go through (dnssec.go).
func (g *generation) resolverIn(qname, pool string) (server.Resolver, string) {
	if z, ok := g.zones.Match(qname); ok {
		return z, zoneSource(z)
	}
	if gp := g.groups[pool]; gp != nil {
		return gp.pool, query.SourcePool
	}
	return g.pool, query.SourcePool
}

// redactAll is URLs as logs may show them (docs/design.md#redaction).
func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = upstream.RedactString(u)
	}
	return out
}

// poolProblems are /api/health's words for the group pools every upstream
// of which is in backoff, sorted: that group's clients are likely getting
// SERVFAIL while everyone else is served, so the health is degraded, not
// an error (docs/filter.md "Per-group upstreams").
func (g *generation) poolProblems() []string {
	var out []string
	for name, gp := range g.groups {
		ups := gp.pool.Snapshot().Upstreams
		down := 0
		for _, u := range ups {
			if u.InBackoff {
				down++
			}
		}
		if len(ups) > 0 && down == len(ups) {
			out = append(out, "group "+name+": every one of its own upstreams is in backoff")
		}
	}
	slices.Sort(out)
	return out
}

// guardOf is the rebinding protection of cfg, or nil when it is off.
func guardOf(cfg config.Config, eng *filter.Engine) server.AnswerGuard {
	if !cfg.DNS.Rebinding() {
		return nil
	}
	return rebind.New(rebind.Options{
		Allow:    cfg.DNS.RebindingAllowed(),
		Allowed:  eng.DashboardAllows,
		NXDomain: cfg.DNS.RebindingAnswer == config.RebindingNXDomain,
	})
}

// PoolSnapshots are the group pools' snapshots by group name, for the
// metrics' pool label.
func (g *generation) PoolSnapshots() map[string]upstream.Snapshot {
	out := make(map[string]upstream.Snapshot, len(g.groups))
	for name, gp := range g.groups {
		out[name] = gp.pool.Snapshot()
	}
	return out
}
