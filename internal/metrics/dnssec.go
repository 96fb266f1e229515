package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/dnssec"
)

// DNSSEC series (docs/dnssec.md); the status label is one of four values.
var (
	dnssecVerdicts = prometheus.NewDesc("nxdns_dnssec_verdicts_total",
		"Answers validated, by verdict: secure, insecure, bogus, indeterminate.",
		[]string{"status"}, nil)
	dnssecEnforced = prometheus.NewDesc("nxdns_dnssec_enforced_total",
		"Bogus answers replaced by SERVFAIL (enforce mode with the clock set).",
		nil, nil)
	dnssecSkipped = prometheus.NewDesc("nxdns_dnssec_skipped_total",
		"Answers shadow mode did not validate: its queue of validations was full.",
		nil, nil)
	dnssecDuration = prometheus.NewDesc("nxdns_dnssec_validation_duration_seconds",
		"Time spent validating one answer, DS and DNSKEY fetches included.",
		nil, nil)
)

// dnssecCollector reads the App's dnssec.Stats at scrape time.
type dnssecCollector struct{ snap func() dnssec.Snapshot }

func (dnssecCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- dnssecVerdicts
	ch <- dnssecEnforced
	ch <- dnssecSkipped
	ch <- dnssecDuration
}

func (c dnssecCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send(ch, dnssecVerdicts, prometheus.CounterValue, float64(s.Secure), "secure")
	send(ch, dnssecVerdicts, prometheus.CounterValue, float64(s.Insecure), "insecure")
	send(ch, dnssecVerdicts, prometheus.CounterValue, float64(s.Bogus), "bogus")
	send(ch, dnssecVerdicts, prometheus.CounterValue, float64(s.Indeterminate), "indeterminate")
	send(ch, dnssecEnforced, prometheus.CounterValue, float64(s.Enforced))
	send(ch, dnssecSkipped, prometheus.CounterValue, float64(s.Skipped))
	sendHistogram(ch, dnssecDuration, s.Latency)
}
