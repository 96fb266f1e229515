package metrics

import (
	"maps"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/stats"
	"github.com/nxdns/nxdns/internal/upstream"
)

// histogramOf is a histogram snapshot holding ds.
func histogramOf(ds ...time.Duration) stats.HistogramSnapshot {
	var h stats.Histogram
	for _, d := range ds {
		h.Observe(d)
	}
	return h.Snapshot()
}

// sampleSources are non-empty snapshots of two upstreams and three zones with
// a distinct value in every field, so a field mapped to the wrong series
// shows.
func sampleSources() Sources {
	pool := upstream.Snapshot{
		Upstreams: []upstream.UpstreamSnapshot{
			{
				Index: 0, URL: "tls://192.0.2.1:853", Slots: 32, InFlight: 5,
				QueuedTotal: 7, QueuedSeconds: 1.25, Successes: 100, Failures: 3,
				ReuseRecoveries: 4,
				Dials:           upstream.Dials{New: 12, Resumed: 13, Failed: 14},
				AttemptLatency:  histogramOf(3*time.Millisecond, 40*time.Millisecond, 6*time.Second),
			},
			{
				Index: 1, URL: "https://192.0.2.2:8443", Slots: 32, InFlight: 0,
				QueuedTotal: 1, QueuedSeconds: 0.5, Successes: 9, Failures: 11,
				InBackoff: true, BackoffEpisodes: 3, AttemptLatency: histogramOf(2500 * time.Millisecond),
			},
		},
		BudgetExhausted: 2,
	}
	srv := server.Snapshot{
		Queries: []server.QueryCount{
			{Source: "pool", Rcode: "NOERROR", Count: 90},
			{Source: "pool", Rcode: "SERVFAIL", Count: 6},
			{Source: "refused", Rcode: "REFUSED", Count: 13},
			{Source: "zone:lan.", Rcode: "NXDOMAIN", Count: 21},
		},
		Latency:        histogramOf(time.Millisecond, 20*time.Millisecond),
		UDPInFlight:    3,
		TCPConns:       2,
		UDPDropped:     17,
		Malformed:      19,
		TCPRefused:     23,
		UDPClientShare: 53,
		UDPKernel:      59,
		UDPBadSource:   61,
		TCPClientShare: 67,
		TCPNotAllowed:  71,
		Undelivered:    73,
		Refused:        13,
		TCPIdleClosed:  29,
		TCPSlowClosed:  31,
		Protos:         []server.ProtoCount{{Proto: "udp", Count: 70}, {Proto: "tcp", Count: 3}, {Proto: "dot", Count: 40}, {Proto: "doh", Count: 17}},
	}
	zones := []forward.ZoneSnapshot{
		{Zone: "lan.", Resolver: "udp://192.168.1.1:53", Queries: 41, Failures: 1, Truncated: 2},
		{Zone: "168.192.in-addr.arpa.", Resolver: "udp://192.168.1.1:53", Queries: 43, Failures: 0, Truncated: 0},
		{Zone: "iot.lan.", Resolver: "tcp://192.168.2.1:53", Queries: 47, Failures: 5, Truncated: 0},
	}
	cacheSnap := cache.Snapshot{Hits: 53, Misses: 59, Stale: 61, Prefetches: 67, Coalesced: 71, Evictions: 73, Entries: 79}
	return Sources{
		Pool: func() upstream.Snapshot { return pool },
		GroupPools: func() map[string]upstream.Snapshot {
			return map[string]upstream.Snapshot{"kids": {
				Upstreams:       []upstream.UpstreamSnapshot{{Index: 0, URL: "tls://192.0.2.3:853", Slots: 32, Successes: 71}},
				BudgetExhausted: 73,
			}}
		},
		RateLimit: func() server.RateSnapshot { return server.RateSnapshot{Limited: 79, Devices: 83, Evicted: 89} },
		Server:    func() server.Snapshot { return srv },
		Zones:     func() []forward.ZoneSnapshot { return zones },
		TLS:       sampleTLS,
		Cert:      sampleCert,
		Config: func() ConfigState {
			return ConfigState{ReloadsOK: 3, ReloadsFailed: 2, LastFailed: true, Generation: 4, LoadedAt: time.Unix(1700000000, 500e6)}
		},
		Cache: func() cache.Snapshot { return cacheSnap },

		LogDropped: func() uint64 { return 43 },
		History: func() history.Stats {
			return history.Stats{Recorded: 53, Dropped: 2, Lost: 3, BytesWritten: 59 << 10, WriteErrors: 1, Pruned: 61, UsedBytes: 67 << 10, Degraded: true}
		},
		Filter: func() filter.Snapshot { return filterSnap },
		DNSSEC: func() dnssec.Snapshot {
			return dnssec.Snapshot{Secure: 71, Insecure: 73, Bogus: 2, Indeterminate: 1, Enforced: 1}
		},
		Devices: func() devices.Stats {
			return devices.Stats{Devices: 12, New: 2, NewTotal: 5, Evicted: 1, Collisions: 3,
				Configured: []devices.DeviceCount{{Name: "kids-tablet", Queries: 77}}, OtherQueries: 79}
		},
		Neighbours: func() (devices.NeighbourStats, bool) {
			return devices.NeighbourStats{Entries: 30, Flaps: 2, Dropped: 1, Rescans: 3, Failures: 0}, true
		},
		Peers: func() []PeerState {
			return []PeerState{{URL: "http://192.168.1.3:9153", InSync: true, Pulls: 10, Failures: 1, Changes: 2}}
		},
		MQTT: func() MQTTState {
			return MQTTState{Enabled: true, Connected: true, Published: 120, Dropped: 3, ConnectionsLost: 1, Applied: 4, Invalid: 2}
		},
		Web: func() WebState {
			return WebState{LoginRateLimited: 41, LoginEpisodes: 2, Tokens: []TokenCount{{Name: "ha", Result: "ok", N: 3}}}
		},
	}
}

// filterSnap is a loaded list and one that never loaded.
var filterSnap = filter.Snapshot{
	Lists: []filter.ListStatus{
		{Name: "ads", Rules: 1000, Blocked: 31, Failures: 1, Loaded: time.Unix(1000, 0)},
		{Name: "late", Rules: 0, Failures: 3},
	},
	Now:        time.Unix(1600, 0),
	Inline:     37,
	Services:   map[string]uint64{"tiktok": 47},
	SafeSearch: map[string]uint64{"google": 53, "youtube": 0},
}

// gatherNxdns gathers only nxdns's collectors of src through a pedantic
// registry, which also checks every sample against its Desc.
func gatherNxdns(t testing.TB, src Sources) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(nxdnsCollectors(src)...)
	return gatherFrom(t, reg)
}

func gatherFrom(t testing.TB, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// sample returns the sample of family name whose labels are exactly labels.
func sample(t testing.TB, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mf, ok := fams[name]
	if !ok {
		t.Fatalf("no family %s", name)
	}
	for _, m := range mf.GetMetric() {
		got := make(map[string]string, len(m.GetLabel()))
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if maps.Equal(got, labels) {
			return m
		}
	}
	t.Fatalf("%s has no sample labelled %v", name, labels)
	return nil
}

// value is a counter's or gauge's value.
func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}
