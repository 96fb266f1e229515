package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/forward"
)

// Forward-zone series (docs/design.md#metrics), labelled zone (the FQDN, "lan.") and
// resolver ("udp://192.168.1.1:53"). A zone's resolver URL carries no
// secret: config allows only scheme, IP and port.
var (
	zoneLabels = []string{"zone", "resolver"}

	forwardQueries = prometheus.NewDesc("nxdns_forward_queries_total",
		"Queries sent to this forward zone's resolver, PTR lookups for client names included.",
		zoneLabels, nil)
	forwardFailures = prometheus.NewDesc("nxdns_forward_failures_total",
		"Exchanges with this zone's resolver that failed on its account (no answer within read_timeout_ms, refused, reset, bad response); answered SERVFAIL.",
		zoneLabels, nil)
	forwardTCPFallbacks = prometheus.NewDesc("nxdns_forward_tcp_fallbacks_total",
		"UDP answers from this zone's resolver that came back truncated (TC=1) and were asked again over TCP.",
		zoneLabels, nil)
	forwardResolverUp = prometheus.NewDesc("nxdns_forward_resolver_up",
		"1 while this zone's resolver answers, 0 from a failed start-up probe or three failed exchanges in a row until it answers again (probed in the background meanwhile).",
		zoneLabels, nil)
	forwardProbes = prometheus.NewDesc("nxdns_forward_probes_total",
		"Background probes (SOA of the zone) sent to this zone's resolver, by outcome (success, failure): at start, on reload and while it is down.",
		append(zoneLabels, "outcome"), nil)
)

// forwardCollector reads the forward zones' Snapshot at scrape time.
type forwardCollector struct{ snap func() []forward.ZoneSnapshot }

func (forwardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- forwardQueries
	ch <- forwardFailures
	ch <- forwardTCPFallbacks
	ch <- forwardResolverUp
	ch <- forwardProbes
}

func (c forwardCollector) Collect(ch chan<- prometheus.Metric) {
	for _, z := range c.snap() {
		send(ch, forwardQueries, prometheus.CounterValue, float64(z.Queries), z.Zone, z.Resolver)
		send(ch, forwardFailures, prometheus.CounterValue, float64(z.Failures), z.Zone, z.Resolver)
		send(ch, forwardTCPFallbacks, prometheus.CounterValue, float64(z.Truncated), z.Zone, z.Resolver)
		up := 1.0
		if z.Down {
			up = 0
		}
		send(ch, forwardResolverUp, prometheus.GaugeValue, up, z.Zone, z.Resolver)
		send(ch, forwardProbes, prometheus.CounterValue, float64(z.ProbesOK), z.Zone, z.Resolver, "success")
		send(ch, forwardProbes, prometheus.CounterValue, float64(z.ProbesFailed), z.Zone, z.Resolver, "failure")
	}
}
