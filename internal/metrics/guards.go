package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/server"
)

// The per-device rate limit's series (docs/protocol.md "Rate limit"). The
// refused queries also count in nxdns_queries_total{source="ratelimited"}
// and rebinding protection's in nxdns_queries_total{source="rebinding"}.
var (
	rateLimited = prometheus.NewDesc("nxdns_rate_limited_total",
		"Queries answered REFUSED (EDE 18) because their device had used its dns.rate_limit_burst and dns.rate_limit_qps.",
		nil, nil)
	rateDevices = prometheus.NewDesc("nxdns_rate_limit_devices",
		"Devices (an IPv4 address or an IPv6 /64) the rate limit holds a bucket for now, at most 16384.",
		nil, nil)
	rateEvicted = prometheus.NewDesc("nxdns_rate_limit_evicted_total",
		"Buckets dropped from the full table before they had refilled: a flood from many (likely spoofed) sources.",
		nil, nil)
)

type rateCollector struct{ snap func() server.RateSnapshot }

func (rateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- rateLimited
	ch <- rateDevices
	ch <- rateEvicted
}

func (c rateCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send(ch, rateLimited, prometheus.CounterValue, float64(s.Limited))
	send(ch, rateDevices, prometheus.GaugeValue, float64(s.Devices))
	send(ch, rateEvicted, prometheus.CounterValue, float64(s.Evicted))
}
