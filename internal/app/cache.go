package app

import (
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/web"
)

// cacheOptions are the answer cache's settings from cfg (docs/design.md#cache). The
// cache itself belongs to the App, not to a generation, so its entries and
// counters survive a reload; each generation gets a new cache.Stage over it.
func cacheOptions(cfg config.Config, log *zap.Logger) cache.Options {
	d := cfg.DNS
	return cache.Options{
		Size:        d.CacheSize,
		MaxBytes:    d.CacheBytes,
		MinTTL:      d.MinTTL(),
		MaxTTL:      d.MaxTTL(),
		StaleMaxAge: d.StaleAge(),
		Prefetch:    d.PrefetchOn(),
		File:        d.CacheFile,
		Logger:      log,
	}
}

// reconfigureCache applies a reload's cache settings to the running cache,
// and forgets the names of every forward zone added, removed or pointed at
// another resolver: their cached answers came from whoever answered them
// before, and a LAN name must not keep a public resolver's answer (docs/design.md#forward-zones).
func (a *App) reconfigureCache(old, cfg config.Config) {
	if a.cache.Reconfigure(cacheOptions(cfg, a.log)) {
		a.log.Info("cache emptied: dns.cache_size, dns.cache_max_bytes or the TTL clamps changed")
		return
	}
	was := map[string]string{}
	for _, z := range old.ForwardZones {
		was[z.FQDN()] = z.Resolver
	}
	for _, z := range cfg.ForwardZones {
		if r, ok := was[z.FQDN()]; !ok || r != z.Resolver {
			a.cache.Flush(z.FQDN())
		}
		delete(was, z.FQDN())
	}
	for zone := range was {
		a.cache.Flush(zone)
	}
}

// cacheRoutes adds the cache's API (docs/design.md#cache-api) to a web endpoint: flushing
// changes how names are answered, an entry shows which names the household
// asks, so neither is public.
func (a *App) cacheRoutes(s *web.Server) {
	s.Handle("POST /api/cache/flush", a.cache.FlushHandler(), web.Mutating)
	s.Handle("GET /api/cache/entry", a.cache.EntryHandler(), web.Private)
}

// closeCache saves the cache file on the way out.
func (a *App) closeCache() {
	if err := a.cache.Close(); err != nil {
		a.log.Warn("cache file not written", zap.Error(err))
	}
}
