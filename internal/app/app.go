// Package app is nxdns's composition root: it builds the server, the pool,
// the forward zones and the web endpoint from a configuration, swaps in a
// new configuration on reload without dropping a query, and shuts
// everything down in order.
package app

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/dashboard"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/localnet"
	"github.com/nxdns/nxdns/internal/logging"
	"github.com/nxdns/nxdns/internal/metrics"
	"github.com/nxdns/nxdns/internal/mqtt"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
	"github.com/nxdns/nxdns/internal/web"
)

// drainMargin is added to the longest query budget when waiting for queries
// in flight (reload, shutdown): the budget bounds a query's resolution, the
// margin covers writing its answer and the query log line.
const drainMargin = time.Second

// clockPoll is how often the clock's state is read (internal/clock): a stat
// or two, and the delay between timesyncd setting the clock and nxdns
// probing its upstreams again.
const clockPoll = 2 * time.Second

// Options are what the App needs besides the configuration.
type Options struct {
	Logger *zap.Logger
	// Level is changed in place when a reload changes log.level. The zero
	// value (a library caller that built its own logger) gets a level of its
	// own that nothing reads, so a reload has nothing to change.
	Level  zap.AtomicLevel
	Listen []string       // nxdns run --listen: replaces dns.listen of every file ReloadFile loads
	Clock  *clock.Watcher // nil: the system's clock (clock.System), polled every clockPoll
	// HistoryCheck checks an existing history file before it is opened
	// (history.Options.Precheck; the binary runs itself as `nxdns
	// history-check`). nil opens the file unchecked.
	HistoryCheck func(path string) error
}

// App is a running nxdns.
type App struct {
	log   *zap.Logger
	level zap.AtomicLevel
	srv   *server.Server
	cache *cache.Cache // outlives generations: answers survive a reload

	web     *web.Server // nil when web.listen is empty
	webAddr webEndpoint // web.listen and web.tls_listen as configured
	certs   certState   // the DoT/DoH certificate (tls.go); under mu

	history    *history.History // outlives reloads: every generation records into it
	historyCfg config.History   // the settings it runs with; under mu
	episodes   *episodes.Log    // the upstreams' backoff episodes, across reloads (episodes.go)
	dash       *dashboard.Dashboard
	webHash    []byte         // web.password_file's hash; nil without a login
	webHosts   []string       // web.hostnames: the names a request's Host may carry besides the address
	tokens     *web.Tokens    // API tokens in filter.state_dir, and their counts, across reloads
	webCount   web.Counters   // the web endpoints' counts, across the endpoints reloads replace
	webProblem atomic.Value   // string: why the dashboard is locked (dashboard.go); "" when it is not
	filter     *filter.Engine // lists, pauses and downloads: they outlive a reload

	// layer is the dashboard's configuration layer (layer.go); stored under mu.
	layer atomic.Pointer[layerState]

	// devices: the devices seen, new devices, the neighbour table; they
	// outlive a reload (devices.go).
	devices *devices.Registry

	mu      sync.Mutex                 // serialises Reload, Shutdown and local-network changes
	gen     atomic.Pointer[generation] // the current one; read lock-free by scrapes
	retired sync.WaitGroup

	shutdown    sync.Once // Shutdown's work runs once
	shutdownErr error     // what it returned; set inside shutdown

	local   *localnet.Watcher             // follows dns.allow's "local"; nil until a config uses it
	drains  []func(context.Context) error // states the current generation served through, since its start (local.go)
	stopped bool                          // Shutdown began: no more state swaps
	listen  []string                      // Options.Listen

	statMu    sync.Mutex          // guards stat and reloadErr (reloads.go)
	stat      metrics.ConfigState // reload outcomes and the running generation
	reloadErr string              // why the last reload failed; "" after a good one

	dnssec     dnssec.Stats                // validation verdicts across reloads (dnssec.go)
	dnssecMode string                      // [dnssec] mode of the running generation; under mu
	peers      peerState                   // [[peers]] replication (peers.go)
	mqtt       atomic.Pointer[mqtt.Bridge] // Home Assistant over MQTT (mqtt.go); nil when [mqtt] is off
	mqttSetup  mqttSetup                   // what it was started with; under mu
	mqttPause  atomic.Int64                // mqtt.pause_minutes as a Duration, read by the bridge's goroutines

	clock     *clock.Watcher
	stopClock context.CancelFunc
	clockDone sync.WaitGroup
}

// Start builds everything from cfg (already validated), binds the listeners
// and starts the background probes. On error nothing is left running.
func Start(cfg config.Config, opts Options) (*App, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	level := opts.Level
	if level == (zap.AtomicLevel{}) { // its methods dereference a nil pointer
		level = zap.NewAtomicLevel()
	}
	// What outlives a reload is the App's: the filter engine (loaded lists,
	// pauses), the cache, the history, the clock watcher.
	a := &App{log: log, level: level, listen: opts.Listen, clock: opts.Clock,
		stat: metrics.ConfigState{Generation: 1, LoadedAt: time.Now()}}
	file := cfg
	cfg, layer := a.withLayer(file) // layer.go: the dashboard's changes over the file
	a.layer.Store(&layerState{file: file, eff: cfg, st: layer})
	checkDescriptors(cfg, log)
	a.webHash = a.startPassword(cfg.Web)
	a.webHosts = cfg.Web.Hostnames
	a.tokens = web.NewTokens()
	a.tokens.Configure(cfg.Filter.StateDir, cfg.Web.TokensOverHTTP)
	a.filter = filter.New(filter.Options{Logger: log.Named("filter"), LookupHost: a.lookupHost})
	a.history, a.historyCfg = openHistory(cfg.History, log, opts.HistoryCheck), cfg.History
	a.episodes = episodes.New(episodes.Options{Store: a.history})
	gen, err := build(cfg, log, a.filter, a.episodes, nil)
	if err != nil {
		a.filter.Close()
		a.history.Close()
		return nil, err
	}
	a.startDevices(cfg)
	gen.useDevices(a.devices)
	a.cache = cache.New(cacheOptions(cfg, log))
	if a.clock == nil {
		a.clock = clock.NewWatcher(clock.System(), clockPoll)
	}
	a.dash = a.newDashboard()
	gen.history = a.history
	gen.cache = a.cache.Stage()
	// fail undoes whatever had started, in reverse, so an error leaves
	// nothing running.
	fail := func(err error) (*App, error) {
		if a.srv != nil {
			a.srv.Shutdown(context.Background())
		}
		a.stopLocal()
		gen.close()
		a.closeDevices()
		a.filter.Close()
		a.closeCache()
		a.closeHistory()
		return nil, err
	}
	if err := a.attachDNSSEC(gen); err != nil {
		return fail(err)
	}
	store, err := a.prepareCerts(cfg.TLS)
	if err != nil {
		return fail(err)
	}
	gen.certs = store
	a.gen.Store(gen)
	// The last good list copies on disk, before the first query; downloads
	// start too, and resolve their hosts through gen (lookupHost).
	a.filter.Update(cfg.Filter)
	if err := a.followLocal(cfg); err != nil {
		return fail(err)
	}
	// filter.state_dir as the file at start says: the QUIC stateless-reset
	// secret is read once (docs/server.md "Stateless resets after a restart").
	a.srv = server.New(server.Options{Logger: log, StateDir: cfg.Filter.StateDir}, gen.state(a.localPrefixes()))
	if err := a.srv.Listen(cfg.DNS.Listen); err != nil {
		return fail(explainListen(err))
	}
	if err := a.srv.ListenTLS(cfg.TLS.DoTListen, cfg.TLS.DoHListen, certSource(store)); err != nil {
		return fail(explainListen(err))
	}
	if err := a.srv.ListenDoQ(cfg.TLS.DoQListen); err != nil {
		return fail(explainListen(err))
	}
	if err := a.srv.ListenDoH3(cfg.TLS.DoH3Listen); err != nil {
		return fail(explainListen(err))
	}
	ws, err := a.bindWeb(endpointOf(cfg.Web))
	if err != nil {
		return fail(explainListen(err))
	}
	a.commitWeb(ws)
	a.commitCerts(store) // last: its poll goroutine runs only for an App that started
	gen.start()
	a.logEffective(cfg)
	a.watchClock()
	if ms, err := loadMQTT(cfg.MQTT); err != nil {
		a.log.Error("MQTT off: fix [mqtt] and reload", zap.Error(err))
	} else {
		a.applyMQTT(ms)
	}
	if pl, err := loadPeers(cfg.Peers); err != nil {
		a.log.Error("peers off: fix [[peers]] and reload", zap.Error(err))
	} else {
		a.applyPeers(cfg, pl)
	}
	return a, nil
}

// Reload applies a new configuration, or keeps the running one and returns
// why not. The new generation is built and its listeners bound before
// anything changes; queries already running finish on the old generation,
// which is closed in the background once they have.
func (a *App) Reload(cfg config.Config) (err error) {
	defer func() { a.recordReload(err) }()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reloadLocked(cfg)
}

// reloadLocked is Reload with a.mu held.
func (a *App) reloadLocked(cfg config.Config) error {
	file := cfg
	cfg, layer := a.withLayer(file) // layer.go: the dashboard's changes over the file
	gen, err := build(cfg, a.log, a.filter, a.episodes, a.gen.Load())
	if err != nil {
		return err
	}
	gen.cache = a.cache.Stage()
	gen.history = a.history
	if err := a.attachDNSSEC(gen); err != nil {
		gen.close()
		return err
	}
	gen.useDevices(a.devices)
	store, err := a.prepareCerts(cfg.TLS)
	if err != nil {
		gen.close()
		return err
	}
	gen.certs = store
	if err := a.followLocal(cfg); err != nil {
		gen.close()
		return err
	}
	hash, err := loadWebPassword(cfg.Web)
	if err != nil {
		gen.close()
		return err
	}
	ms, err := loadMQTT(cfg.MQTT)
	if err != nil {
		gen.close()
		return err
	}
	pl, err := loadPeers(cfg.Peers)
	if err != nil {
		gen.close()
		return err
	}
	oldHash := a.webHash
	a.webHash = hash // a new endpoint starts with the new password
	// The web endpoint is bound before the listeners change and released
	// only after they did, so a failure in either leaves everything as it was.
	ws, err := a.bindWeb(endpointOf(cfg.Web))
	if err != nil {
		a.webHash = oldHash
		gen.close()
		return err
	}
	if err := a.srv.Listen(cfg.DNS.Listen); err != nil {
		a.webHash = oldHash
		a.abortWeb(ws)
		gen.close()
		return explainListen(err)
	}
	// After the plain listeners: a TLS address that fails to bind leaves them
	// as the new file says, but keeps the running generation and TLS
	// listeners, and the error says which address.
	if err := a.srv.ListenTLS(cfg.TLS.DoTListen, cfg.TLS.DoHListen, certSource(store)); err != nil {
		a.webHash = oldHash
		a.abortWeb(ws)
		gen.close()
		return err
	}
	if err := a.srv.ListenDoQ(cfg.TLS.DoQListen); err != nil {
		a.webHash = oldHash
		a.abortWeb(ws)
		gen.close()
		return err
	}
	if err := a.srv.ListenDoH3(cfg.TLS.DoH3Listen); err != nil {
		a.webHash = oldHash
		a.abortWeb(ws)
		gen.close()
		return err
	}
	a.commitCerts(store)
	a.commitWeb(ws)
	a.reconfigureCache(a.gen.Load().cfg, cfg)
	a.webHosts = cfg.Web.Hostnames
	a.tokens.Configure(cfg.Filter.StateDir, cfg.Web.TokensOverHTTP)
	if a.web != nil {
		a.web.SetPassword(hash) // the running endpoint, when web.listen did not change
		a.web.SetHostnames(a.webHosts)
	}
	a.webProblem.Store("") // the new file was read: nothing is locked any more
	a.reconfigureHistory(cfg.History)
	a.followNeighbours(cfg)
	old := a.gen.Swap(gen)
	a.followEpisodes(old, gen)
	a.filter.Update(cfg.Filter) // rebuilds only when the lists changed or a local list file was edited
	a.applyMQTT(ms)
	a.applyPeers(cfg, pl)
	drains := append(a.drains, a.srv.Swap(gen.state(a.localPrefixes())))
	a.drains = nil
	gen.start()
	if lvl, err := logging.ParseLevel(cfg.Log.Level); err == nil {
		a.level.SetLevel(lvl)
	}
	a.retired.Go(func() {
		// Every query that started on old ends within old's own budget.
		ctx, cancel := context.WithTimeout(context.Background(), old.drainBound())
		defer cancel()
		if err := drainAll(ctx, drains); err != nil {
			a.log.Warn("closing the previous configuration with queries still running", zap.Error(err))
		}
		old.close()
	})
	a.layer.Store(&layerState{file: file, eff: cfg, st: layer})
	a.logEffective(cfg)
	checkDescriptors(cfg, a.log) // the caps may have grown: a new family, a first forward zone
	return nil
}

// ReloadFile reads, validates and applies path. An invalid file changes
// nothing: every problem is logged and the running configuration stays.
func (a *App) ReloadFile(path string) error {
	cfg, err := config.LoadFile(path)
	if err == nil {
		err = cfg.OverrideListen(a.listen).Err()
	}
	if err != nil {
		a.recordReload(err) // Reload, which counts the rest, is not reached
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				a.log.Error("reload rejected: configuration problem", zap.String("file", path), zap.String("problem", p.String()))
			}
		} else {
			a.log.Error("reload rejected", zap.String("file", path), zap.Error(err))
		}
		return err
	}
	if err := a.Reload(cfg); err != nil {
		a.log.Error("reload failed; keeping the running configuration", zap.String("file", path), zap.Error(err))
		return err
	}
	a.log.Info("reloaded", zap.String("file", path))
	return nil
}

// webSwap is a change of the web endpoint prepared by bindWeb and finished
// by commitWeb or undone by abortWeb.
type webSwap struct {
	next     *web.Server // the endpoint to keep: the running one, a new one, or nil
	addr     webEndpoint // web.listen and web.tls_listen it serves
	released bool        // the running endpoint was stopped early to free its port
}

// bindWeb prepares the web endpoint for addr: the running one when web.listen
// did not change, otherwise a new one already bound (nil for ""), while the
// running one keeps serving until commitWeb.
//
// One exception: Linux refuses to bind 0.0.0.0:9153 while 127.0.0.1:9153 is
// bound (and the reverse), so for a new address on the same port the running
// endpoint is released first. The web endpoint is not on the DNS path; if the
// new address still fails, the old one is bound again.
func (a *App) bindWeb(addr webEndpoint) (webSwap, error) {
	if addr == a.webAddr {
		return webSwap{next: a.web, addr: addr}, nil
	}
	if addr.listen == "" {
		return webSwap{addr: addr}, nil
	}
	next := a.newWeb(addr)
	err := next.Start()
	if err == nil {
		return webSwap{next: next, addr: addr}, nil
	}
	if a.web == nil || !errors.Is(err, syscall.EADDRINUSE) || !samePort(addr.listen, a.webAddr.listen) && !samePort(addr.tls, a.webAddr.tls) {
		return webSwap{}, err
	}
	stopWeb(a.web)
	next = a.newWeb(addr)
	if err := next.Start(); err != nil {
		a.restoreWeb()
		return webSwap{}, err
	}
	return webSwap{next: next, addr: addr, released: true}, nil
}

// commitWeb makes the prepared endpoint current and stops the previous one.
func (a *App) commitWeb(s webSwap) {
	if s.next != a.web && !s.released {
		stopWeb(a.web)
	}
	a.web, a.webAddr = s.next, s.addr
}

// abortWeb undoes bindWeb after a later step of the reload failed.
func (a *App) abortWeb(s webSwap) {
	if s.next != a.web {
		stopWeb(s.next)
	}
	if s.released {
		a.restoreWeb()
	}
}

// restoreWeb binds the running web.listen again after it was released.
func (a *App) restoreWeb() {
	w := a.newWeb(a.webAddr)
	if err := w.Start(); err != nil {
		a.log.Error("web endpoint lost: its address could not be bound again", zap.String("addr", a.webAddr.listen), zap.Error(err))
		a.web, a.webAddr = nil, webEndpoint{}
		return
	}
	a.web = w
}

// newWeb builds the HTTP endpoint: /metrics, /api/health, and each
// feature's own routes (web.Server.Handle) with the access they need.
func (a *App) newWeb(addr webEndpoint) *web.Server {
	s := web.New(addr.listen, a.registry(), a.health, a.log)
	if addr.tls != "" {
		s.SetTLS(addr.tls, a.webCertificate)
	}
	s.ShareCounters(&a.webCount)
	s.SetTokens(a.tokens)
	a.cacheRoutes(s)
	a.dnssecRoutes(s)
	a.devicesRoutes(s) // devices.go
	a.peerRoutes(s)
	a.layerRoutes(s) // layer.go
	a.addDashboard(s)
	for _, r := range a.filter.Routes(func() *filter.Stage { return a.gen.Load().filter }) {
		access := web.Private
		if r.Mutating {
			access = web.Mutating
		}
		s.Handle(r.Pattern, r.Handler, access)
	}
	return s
}

// samePort reports whether two host:port strings name the same port.
func samePort(a, b string) bool {
	pa, errA := netip.ParseAddrPort(a)
	pb, errB := netip.ParseAddrPort(b)
	return errA == nil && errB == nil && pa.Port() == pb.Port()
}

// stopWeb shuts a web endpoint down; a scrape in progress gets a second.
func stopWeb(w *web.Server) {
	if w == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	w.Shutdown(ctx)
}

// DrainBound is how long a query that started now may still run: the
// current configuration's longest budget plus a margin. SIGTERM waits this
// long for queries in flight.
func (a *App) DrainBound() time.Duration { return a.gen.Load().drainBound() }

// Shutdown stops accepting queries, lets running ones finish until ctx ends,
// then closes everything. Only the first call does that; a later one waits
// for it and returns its result, so a caller's deferred Shutdown after an
// explicit one is harmless.
func (a *App) Shutdown(ctx context.Context) error {
	a.shutdown.Do(func() { a.shutdownErr = a.shutdownOnce(ctx) })
	return a.shutdownErr
}

func (a *App) shutdownOnce(ctx context.Context) error {
	// The clock watcher first: a re-probe it started takes a.mu.
	a.stopClock()
	a.clockDone.Wait()
	a.stopLocal()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stopMQTT() // "offline" while DNS still answers
	a.stopPeers()
	err := a.srv.Shutdown(ctx)
	stopWeb(a.web)
	a.stopCerts()
	a.retired.Wait()
	a.gen.Load().close()
	a.closeDevices()
	a.filter.Close()
	a.closeCache()
	a.closeHistory() // after the last query: its event is in the final flush
	return err
}

// Server exposes the DNS front end (listener addresses, counters).
func (a *App) Server() *server.Server { return a.srv }

// registry reads the current generation at every scrape, so a reload's new
// pool and zones are what /metrics shows (their counters start again at
// zero, which Prometheus treats as a counter reset).
func (a *App) registry() *prometheus.Registry {
	return metrics.New(metrics.Sources{
		Pool:       func() upstream.Snapshot { return a.gen.Load().pool.Snapshot() },
		GroupPools: func() map[string]upstream.Snapshot { return a.gen.Load().PoolSnapshots() },
		RateLimit:  func() server.RateSnapshot { return a.gen.Load().limit.Snapshot() },
		Server:     a.srv.Snapshot,
		Zones:      func() []forward.ZoneSnapshot { return a.gen.Load().zones.Snapshot() },
		TLS:        a.srv.TLSSnapshot,
		Cert:       a.certStatus,
		Config:     a.configState,
		Cache:      a.cache.Snapshot,
		LogDropped: logging.Dropped,
		History:    a.history.Snapshot,
		Filter:     a.filter.Snapshot,
		DNSSEC:     a.dnssec.Snapshot,
		MQTT:       a.mqttState,
		Peers:      a.peerMetrics,
		Web: func() metrics.WebState {
			return metrics.WebState{LoginRateLimited: a.webCount.LoginRateLimited.Load(), LoginEpisodes: a.webCount.LoginEpisodes.Load(), Tokens: a.tokenCounts()}
		},
		Devices:    a.devices.Stats,
		Neighbours: a.neighbourStats, // devices.go
	})
}

// health is /api/health's view of the current state.
func (a *App) health() web.Health {
	udp, _ := a.srv.Addrs()
	g := a.gen.Load()
	fs := a.filter.Snapshot()
	h := web.HealthFrom(g.pool.Snapshot(), a.srv.Snapshot(), len(udp)).
		WithClock(a.clock.Current()).
		WithZones(g.zones.Snapshot()).
		WithHistory(a.historyStore(), a.history.Problem()).
		WithLists(len(fs.Lists), fs.Stale()).
		WithDNSSEC(a.dnssecHealth())
	if st, ok := a.certStatus(); ok {
		h.AddCertificate(st.NotAfter, st.LastError, time.Now())
	}
	if p, _ := a.webProblem.Load().(string); p != "" {
		h.Problems = append(h.Problems, "web: "+p)
		if h.Status == web.StatusOK {
			h.Status = web.StatusDegraded
		}
	}
	for _, p := range g.poolProblems() {
		h.Problems = append(h.Problems, p)
		if h.Status == web.StatusOK {
			h.Status = web.StatusDegraded
		}
	}
	if p := a.reloadProblem(); p != "" {
		h.Problems = append(h.Problems, p)
		if h.Status == web.StatusOK {
			h.Status = web.StatusDegraded
		}
	}
	return h
}

// logEffective prints the configuration summary docs/design.md#logs asks for at start-up.
func (a *App) logEffective(cfg config.Config) {
	ups := make([]string, 0, len(cfg.Upstreams))
	for _, e := range a.gen.Load().pool.Snapshot().Upstreams {
		ups = append(ups, fmt.Sprintf("%d:%s", e.Index, e.URL))
	}
	zones := make([]string, 0, len(cfg.ForwardZones))
	for _, z := range cfg.ForwardZones {
		zones = append(zones, z.FQDN()+"→"+upstream.RedactString(z.Resolver)) // a DoH zone's path may hold a token
	}
	fields := []zap.Field{
		zap.Strings("listen", cfg.DNS.Listen),
		zap.Strings("allow", cfg.DNS.Allow),
		zap.Strings("upstreams", ups),
		zap.Strings("zones", zones),
		zap.Int("attempt_timeout_ms", cfg.Upstream.AttemptTimeoutMS),
		zap.Int("total_timeout_ms", cfg.Upstream.TotalTimeoutMS),
		zap.String("web", cfg.Web.Listen),
		zap.Strings("dot_listen", cfg.TLS.DoTListen),
		zap.Strings("doh_listen", cfg.TLS.DoHListen),
		zap.Strings("doq_listen", cfg.TLS.DoQListen),
		zap.Strings("doh3_listen", cfg.TLS.DoH3Listen),
		zap.Int("cache_size", cfg.DNS.CacheSize),
		zap.String("cache_file", cfg.DNS.CacheFile),
		zap.Bool("query_log", cfg.Log.QueryLog()),
	}
	if cfg.DNS.AllowsLocal() {
		fields = append(fields, zap.Stringers("local_networks", a.localPrefixes()))
	}
	for _, g := range cfg.PooledGroups() { // docs/filter.md "Per-group upstreams"
		fields = append(fields, zap.Strings("group_upstreams."+g.Name, redactAll(g.Upstreams)))
	}
	a.log.Info("configuration", fields...)
}
