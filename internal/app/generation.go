package app

import (
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/local"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

// generation is everything one configuration builds for answering queries:
// the pool with its upstream connections, the forward zones and the client
// names. A reload builds a new generation beside the running one and retires
// the old one once no query uses it.
type generation struct {
	cfg    config.Config
	pool   *upstream.Pool
	zones  *forward.Table
	names  *forward.Names
	local  *local.Stage
	filter *filter.Stage // over App's long-lived filter.Engine
}

// build makes a generation from a validated configuration. Nothing is
// started: the pool's probes start with start, so a generation that fails
// half-way is closed without having sent anything.
func build(cfg config.Config, log *zap.Logger, eng *filter.Engine) (*generation, error) {
	g := &generation{cfg: cfg, filter: eng.NewStage(cfg, nil)}
	pool, err := buildPool(cfg, log, 0)
	if err != nil {
		return nil, err
	}
	g.pool = pool
	g.zones, err = forward.NewTable(cfg.ForwardZones, cfg.Upstream.Read())
	if err != nil {
		g.close()
		return nil, err
	}
	if g.local, err = buildLocal(cfg, g.zones); err != nil {
		g.close()
		return nil, err
	}
	g.names = forward.NewNames(cfg.ClientNames(), g.zones, forward.NamesOptions{Logger: log.Named("names")})
	return g, nil
}

// buildLocal makes the local-answers stage; a name a forward zone covers is
// the LAN resolver's to answer, never answered locally.
func buildLocal(cfg config.Config, zones *forward.Table) (*local.Stage, error) {
	return local.New(local.Options{
		Records:        cfg.Local.Records,
		ForwardPrivate: cfg.Local.ForwardPrivate,
		BypassGuards:   cfg.Local.Guards(),
		Covered: func(name string) bool {
			_, ok := zones.Match(name)
			return ok
		},
	})
}

// buildPool makes the upstream pool of cfg's enabled upstreams, each with its
// own transport client. slots 0 means the compiled default.
func buildPool(cfg config.Config, log *zap.Logger, slots int) (*upstream.Pool, error) {
	var members []upstream.Member
	closeAll := func() {
		for _, m := range members {
			m.Client.Close()
		}
	}
	// File order: the pool sorts by priority itself, and a member's position
	// is its metrics "index" (docs/reference/metrics.md).
	for i, u := range cfg.Upstreams {
		if !u.IsEnabled() {
			continue
		}
		ep, err := upstream.ParseEndpoint(u.URL, u.Address, u.TLSName)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("upstream %d (%s): %w", i, upstream.RedactString(u.URL), err)
		}
		c, err := upstream.NewClient(ep, u.CAFile, log.Named("transport"))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("upstream %s: %w", ep.Redacted(), err)
		}
		members = append(members, upstream.Member{Endpoint: ep, Client: c, Priority: u.Priority})
	}
	pool, err := upstream.New(upstream.Options{
		Attempt: cfg.Upstream.Attempt(),
		Total:   cfg.Upstream.Total(),
		Logger:  log, // the pool names its own logger "pool"
		Slots:   slots,
	}, members)
	if err != nil {
		closeAll()
		return nil, err
	}
	return pool, nil
}

// state is the server's view of this generation.
func (g *generation) state() *server.State {
	return &server.State{
		Router:   g,
		Allow:    g.cfg.DNS.Allowed(),
		Names:    g.names,
		QueryLog: g.cfg.Log.QueryLog(),
		Budget:   g.cfg.Upstream.Total(),
		Stages:   g.stages(),
		Sinks:    g.sinks(),
	}
}

// stages is the chain between access control and the route, in SPEC §2's
// order; each feature appends its stage on its own line, or nothing when
// the configuration turns it off.
func (g *generation) stages() []query.Stage {
	var stages []query.Stage
	stages = append(stages, g.local)  // local answers (SPEC §8.6)
	stages = append(stages, g.filter) // policy: lists, groups, pause (SPEC §8.7)
	// cache: hit, prefetch, coalescing, serve-stale (SPEC §8.5)
	return stages
}

// sinks are the consumers of every query event besides the server's own log
// and counters.
func (g *generation) sinks() []query.Sink {
	var sinks []query.Sink
	// history (SPEC §9)
	return sinks
}

// Route sends a name to the forward zone with the longest matching suffix,
// otherwise to the pool (SPEC §2).
func (g *generation) Route(qname string) (server.Resolver, string) {
	if z, ok := g.zones.Match(qname); ok {
		return z, "zone:" + strings.TrimSuffix(z.Name(), ".")
	}
	return g.pool, "pool"
}

// drainBound is the longest a query routed by this generation can run: the
// pool's total budget or a forward zone's read budget, plus drainMargin.
func (g *generation) drainBound() time.Duration {
	return max(g.cfg.Upstream.Total(), g.cfg.Upstream.Read()) + drainMargin
}

// start begins the background work: the pool's start-up probes.
func (g *generation) start() { g.pool.Start() }

// close releases everything: probes, upstream connections, name lookups.
func (g *generation) close() {
	if g.names != nil {
		g.names.Close()
	}
	if g.pool != nil {
		g.pool.Close()
	}
}
