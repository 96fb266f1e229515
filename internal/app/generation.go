package app

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/local"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/tlscert"
	"github.com/nxdns/nxdns/internal/upstream"
)

// generation is everything one configuration builds for answering queries:
// the pool with its upstream connections, the forward zones and the client
// names. A reload builds a new generation beside the running one and retires
// the old one once no query uses it.
type generation struct {
	log   *zap.Logger
	cfg   config.Config
	pool  *upstream.Pool
	zones *forward.Table
	names *forward.Names
	certs *tlscert.Store // the App's serving certificate, for DDR (tls.go); nil without TLS
	cache *cache.Stage   // the App's cache, seen by this generation's chain
	// allow is the allow list of the state last built (state), read by the
	// learned names; "local" makes it change without a new generation.
	allow   atomic.Pointer[[]netip.Prefix]
	history *history.History // the App's, set by the App after build; nil in tests that build alone
	local   *local.Stage
	filter  *filter.Stage         // over App's long-lived filter.Engine
	health  *poolHealth           // the pool's health transitions, into the App's episodes (episodes.go)
	groups  map[string]*groupPool // the groups' own pools, by group name (pools.go)
	guard   server.AnswerGuard    // rebinding protection; nil when off (pools.go)
	limit   *server.RateLimiter   // the per-device rate limit; nil when off
	// validator validates the answers of the resolvers in validating (the
	// main pool, the groups' pools, the zones that validate), each wrapped
	// once; nil with [dnssec] mode off (dnssec.go).
	validator  *dnssec.Guard
	validating map[server.Resolver]server.Resolver

	// devices names each query's device (devices.go); leases are its
	// lease files, followed until close. nil until useDevices.
	devices *devices.View
	leases  *devices.Leases

	// listLocal is the local stage a filter list's host is resolved
	// through (lookupHost): local; or, with local.forward_private, one that
	// answers the special-use names itself all the same.
	listLocal *local.Stage
}

// build makes a generation from a validated configuration. Nothing is
// started: the pool's probes start with start, so a generation that fails
// half-way is closed without having sent anything.
func build(cfg config.Config, log *zap.Logger, eng *filter.Engine, eps *episodes.Log, prev *generation) (*generation, error) {
	g := &generation{log: log, cfg: cfg, filter: eng.NewStage(cfg, nil), health: newPoolHealth(eps),
		groups: map[string]*groupPool{}, guard: guardOf(cfg, eng),
		limit: server.NewRateLimiter(cfg.DNS.RateLimitQPS, cfg.DNS.RateLimitBurst, cfg.DNS.RateExempt())}
	pool, err := buildPool(cfg, log, 0, g.health.observer())
	if err != nil {
		return nil, err
	}
	g.pool = pool
	if err := g.buildGroupPools(prev); err != nil {
		g.close()
		return nil, err
	}
	g.zones, err = forward.NewTable(cfg.ForwardZones, cfg.Upstream.Read())
	if err != nil {
		g.close()
		return nil, err
	}
	if g.local, err = buildLocal(cfg, g.zones); err != nil {
		g.close()
		return nil, err
	}
	g.listLocal = g.local
	if cfg.Local.ForwardPrivate {
		own := cfg
		own.Local.ForwardPrivate = false
		if g.listLocal, err = buildLocal(own, g.zones); err != nil {
			g.close()
			return nil, err
		}
	}
	g.names = forward.NewNames(cfg.ClientNames(), g.zones, forward.NamesOptions{Logger: log.Named("names"), Allowed: g.isAllowed})
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
		// The DDR stage before this one answers _dns.resolver.arpa when
		// nxdns serves DoT, DoH, DoQ or DoH3 (ddrStage builds it whenever
		// TLS.Serving); the rest of resolver.arpa is ours then.
		Encrypted: cfg.TLS.Serving,
	})
}

// buildPool makes the upstream pool of cfg's enabled upstreams, each with its
// own transport client. slots 0 means the compiled default.
func buildPool(cfg config.Config, log *zap.Logger, slots int, obs upstream.HealthObserver) (*upstream.Pool, error) {
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
		if u.CAFile != "" && len(u.CA) == 0 {
			closeAll()
			return nil, fmt.Errorf("upstream %s: ca_file %s was not read (config.ReadFiles)", ep.Redacted(), u.CAFile)
		}
		c, err := upstream.NewClient(ep, u.CA, log.Named("transport"))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("upstream %s: %w", ep.Redacted(), err)
		}
		members = append(members, upstream.Member{Endpoint: ep, Client: c, Priority: u.Priority})
	}
	pool, err := upstream.New(upstream.Options{
		Attempt:  cfg.Upstream.Attempt(),
		Total:    cfg.Upstream.Total(),
		Logger:   log, // the pool names its own logger "pool"
		Slots:    slots,
		Observer: obs,
	}, members)
	if err != nil {
		closeAll()
		return nil, err
	}
	return pool, nil
}

// isAllowed reports whether a client is inside the allow list this
// generation serves now ("local" included), for the learned names.
func (g *generation) isAllowed(a netip.Addr) bool {
	p := g.allow.Load()
	return p != nil && slices.ContainsFunc(*p, func(pr netip.Prefix) bool { return pr.Contains(a) })
}

// state is the server's view of this generation. local is the host's own
// networks, added to the allow list when dns.allow holds "local" (the app
// builds a new state when they change, see App.localChanged).
func (g *generation) state(local []netip.Prefix) *server.State {
	allow := g.cfg.DNS.Allowed()
	if g.cfg.DNS.AllowsLocal() {
		allow = append(allow, local...)
	}
	g.allow.Store(&allow)
	return &server.State{
		Router:   g,
		Allow:    allow,
		Names:    g.names,
		QueryLog: g.cfg.Log.QueryLog(),
		Budget:   g.cfg.Upstream.Total(),
		Stages:   g.stages(),
		Sinks:    g.sinks(),
		Guard:    g.guard,
		Limit:    g.limit,

		Devices:     g.identifier(),
		Trusted:     g.trusted(),
		ServedNames: g.servedNames(),
	}
}

// stages is the chain between access control and the route, in
// the order of docs/design.md#stage-chain; each feature appends its stage on its own line, or nothing when
// the configuration turns it off.
func (g *generation) stages() []query.Stage {
	var stages []query.Stage
	// DDR: advertise DoT/DoH to plain clients when serving them (docs/design.md#ddr)
	if s := g.ddrStage(); s != nil {
		stages = append(stages, s)
	}
	stages = append(stages, g.local)  // local answers (docs/design.md#local-answers)
	stages = append(stages, g.filter) // policy: lists, groups, pause (docs/design.md#filtering)
	// cache: hit, prefetch, coalescing, serve-stale (docs/design.md#cache)
	if g.cache != nil && g.cfg.DNS.CacheSize > 0 {
		stages = append(stages, g.cache)
	}
	return stages
}

// sinks are the consumers of every query event besides the server's own log
// and counters.
func (g *generation) sinks() []query.Sink {
	var sinks []query.Sink
	if g.history != nil {
		sinks = append(sinks, g.history) // history (docs/design.md#history)
	}
	return sinks
}

// Route sends a name to the forward zone with the longest matching suffix,
// otherwise to the pool (docs/design.md#stage-chain), through the DNSSEC
// validator where validation applies (dnssec.go).
func (g *generation) Route(qname string) (server.Resolver, string) { return g.RouteIn(qname, "") }

// zoneSource is a forward zone's query.Event.Source.
func zoneSource(z *forward.Zone) string { return "zone:" + strings.TrimSuffix(z.Name(), ".") }

// drainBound is the longest a query routed by this generation can run: the
// pool's total budget or a forward zone's read budget, plus drainMargin.
func (g *generation) drainBound() time.Duration {
	return max(g.cfg.Upstream.Total(), g.cfg.Upstream.Read()) + drainMargin
}

// start begins the background work: the start-up probes of the pool and of
// the forward zones' resolvers.
func (g *generation) start() {
	g.pool.Start()
	for _, gp := range g.groups {
		gp.pool.Start() // once: a pool carried over from the previous generation runs already
	}
	g.zones.Start(g.log.Named("forward"))
}

// close releases everything: probes, upstream connections, name lookups.
func (g *generation) close() {
	if g.validator != nil {
		// Shadow's validations after the answer use the pool closed below
		// (docs/dnssec.md "Shadow: the verdict after the answer").
		ctx, cancel := context.WithTimeout(context.Background(), g.drainBound())
		g.validator.Retire(ctx)
		cancel()
	}
	if g.cache != nil {
		g.cache.Close() // its refreshes use the pool and zones closed below
	}
	if g.names != nil {
		g.names.Close()
	}
	g.leases.Close() // nil-safe
	if g.pool != nil {
		g.pool.Close()
	}
	for _, gp := range g.groups {
		gp.release()
	}
	g.zones.Close() // nil-safe, like a table never started
}
