package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/cache"
)

// Answer-cache series (docs/design.md#cache). The cache outlives reloads, so these
// counters do not reset on SIGHUP.
var (
	cacheHits = prometheus.NewDesc("nxdns_cache_hits_total",
		"Queries answered from a fresh cache entry.", nil, nil)
	cacheMisses = prometheus.NewDesc("nxdns_cache_misses_total",
		"Queries the cache passed on to the route (forward zone or pool), alone or sharing an exchange in flight.", nil, nil)
	cacheStale = prometheus.NewDesc("nxdns_cache_stale_answers_total",
		"Queries answered from an expired entry (serve-stale, RFC 8767) with TTL 30 and Extended DNS Error 3.", nil, nil)
	cachePrefetches = prometheus.NewDesc("nxdns_cache_prefetches_total",
		"Background refreshes started for names asked again in the last tenth of their TTL.", nil, nil)
	cacheCoalesced = prometheus.NewDesc("nxdns_cache_coalesced_total",
		"Queries that shared an identical query's exchange in flight instead of sending their own.", nil, nil)
	cacheEvictions = prometheus.NewDesc("nxdns_cache_evictions_total",
		"Entries dropped to make room for new ones at dns.cache_size or dns.cache_max_bytes.", nil, nil)
	cacheOversized = prometheus.NewDesc("nxdns_cache_oversized_total",
		"Answers given to the client but not cached: heavier than 1/64 of dns.cache_max_bytes.", nil, nil)
	cacheBytes = prometheus.NewDesc("nxdns_cache_bytes",
		"Memory the cache's entries may hold at their largest, the sum of their weights: at most dns.cache_max_bytes.", nil, nil)
	cacheEntries = prometheus.NewDesc("nxdns_cache_entries",
		"Entries held in the cache, expired ones kept for serve-stale included.", nil, nil)
)

// cacheCollector reads the cache's Snapshot at scrape time.
type cacheCollector struct{ snap func() cache.Snapshot }

func (cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheHits, cacheMisses, cacheStale, cachePrefetches, cacheCoalesced, cacheEvictions, cacheOversized, cacheBytes, cacheEntries} {
		ch <- d
	}
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send(ch, cacheHits, prometheus.CounterValue, float64(s.Hits))
	send(ch, cacheMisses, prometheus.CounterValue, float64(s.Misses))
	send(ch, cacheStale, prometheus.CounterValue, float64(s.Stale))
	send(ch, cachePrefetches, prometheus.CounterValue, float64(s.Prefetches))
	send(ch, cacheCoalesced, prometheus.CounterValue, float64(s.Coalesced))
	send(ch, cacheEvictions, prometheus.CounterValue, float64(s.Evictions))
	send(ch, cacheOversized, prometheus.CounterValue, float64(s.Oversized))
	send(ch, cacheBytes, prometheus.GaugeValue, float64(s.Bytes))
	send(ch, cacheEntries, prometheus.GaugeValue, float64(s.Entries))
}
