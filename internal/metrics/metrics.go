// Package metrics exposes nxdns's numbers to Prometheus (docs/design.md#metrics). It keeps
// no counter of its own: each collector reads a component's Snapshot at
// scrape time and turns it into constant samples, so every number is kept
// once, by the component that knows it (docs/design.md#lesson-visible: queues, in-flight
// work, connection churn and budget exhaustion are visible on /metrics).
//
// The registry is nxdns's own, never Prometheus's global default, so nothing
// a library registers on the default leaks into /metrics, and a test can
// build as many as it likes.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/stats"
	"github.com/nxdns/nxdns/internal/tlscert"
	"github.com/nxdns/nxdns/internal/upstream"
)

// Sources are what a scrape reads. They are functions rather than values
// because a reload replaces the pool and the forward zones: each call must
// return the snapshot of the ones serving now. Each is called once per
// scrape, from the scraping goroutine, and must return at once. A nil
// function leaves its series out.
type Sources struct {
	Pool func() upstream.Snapshot
	// GroupPools are the groups' own pools by group name (docs/filter.md
	// "Per-group upstreams"); nil or empty for none.
	GroupPools func() map[string]upstream.Snapshot
	// RateLimit is the per-device rate limit's counters (guards.go); nil
	// leaves its series out.
	RateLimit func() server.RateSnapshot
	Server    func() server.Snapshot
	Zones     func() []forward.ZoneSnapshot
	// TLS and Cert are the DoT/DoH series (tls.go); Cert's ok is false
	// while nxdns serves no TLS.
	TLS    func() server.TLSSnapshot
	Cert   func() (tlscert.Status, bool)
	Config func() ConfigState
	Cache  func() cache.Snapshot
	// LogDropped is the count of log lines dropped because the sink stalled
	// (logging.Dropped).
	LogDropped func() uint64
	History    func() history.Stats
	Filter     func() filter.Snapshot
	Web        func() WebState
	DNSSEC     func() dnssec.Snapshot // nil with [dnssec] mode off at start
	// Devices and Neighbours are the device series (devices.go); the
	// neighbours' ok is false while no table is read.
	Devices    func() devices.Stats
	Neighbours func() (devices.NeighbourStats, bool)
	MQTT       func() MQTTState
	Peers      func() []PeerState
}

// New returns a registry holding nxdns's collectors for src plus the Go
// runtime and process collectors (memory, goroutines, file descriptors: what
// an operator of a small appliance checks first). Serve it with
// promhttp.HandlerFor; internal/web does.
func New(src Sources) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		diskIOCollector{"/proc/self/io"},
	)
	reg.MustRegister(nxdnsCollectors(src)...)
	return reg
}

// nxdnsCollectors are the collectors of the sources that are set.
func nxdnsCollectors(src Sources) []prometheus.Collector {
	var cs []prometheus.Collector
	if src.Pool != nil {
		cs = append(cs, upstreamCollector{src.Pool, src.GroupPools})
	}
	if src.RateLimit != nil {
		cs = append(cs, rateCollector{src.RateLimit})
	}
	if src.Server != nil {
		cs = append(cs, serverCollector{src.Server})
	}
	if src.TLS != nil {
		cs = append(cs, tlsCollector{src.TLS, src.Cert})
	}
	if src.Zones != nil {
		cs = append(cs, forwardCollector{src.Zones})
	}
	if src.Config != nil {
		cs = append(cs, configCollector{src.Config})
	}
	if src.Cache != nil {
		cs = append(cs, cacheCollector{src.Cache})
	}
	if src.LogDropped != nil {
		cs = append(cs, logCollector{src.LogDropped})
	}
	if src.History != nil {
		cs = append(cs, historyCollector{src.History})
	}
	if src.Filter != nil {
		cs = append(cs, filterCollector{src.Filter})
	}
	if src.DNSSEC != nil {
		cs = append(cs, dnssecCollector{src.DNSSEC})
	}
	if src.Web != nil {
		cs = append(cs, webCollector{src.Web})
	}
	if src.Devices != nil {
		cs = append(cs, devicesCollector{src.Devices, src.Neighbours, src.Server})
	}
	if src.MQTT != nil {
		cs = append(cs, mqttCollector{src.MQTT})
	}
	if src.Peers != nil {
		cs = append(cs, peersCollector{src.Peers})
	}
	return cs
}

// send emits one sample. Label values come from configuration and are valid
// UTF-8, but should one not be, the sample becomes an invalid metric: with
// promhttp.ContinueOnError that costs the scrape this one series, not every
// number at once, and never panics the scraping goroutine.
func send(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// sendHistogram emits a histogram snapshot, already cumulative as
// Prometheus wants it (stats.HistogramSnapshot).
func sendHistogram(ch chan<- prometheus.Metric, d *prometheus.Desc, h stats.HistogramSnapshot, labels ...string) {
	m, err := prometheus.NewConstHistogram(d, h.Count, h.Sum, h.Buckets, labels...)
	if err != nil {
		m = prometheus.NewInvalidMetric(d, err)
	}
	ch <- m
}

// boolValue is a 0/1 gauge value.
func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
