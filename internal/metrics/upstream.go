package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/upstream"
)

// Upstream series (docs/design.md#metrics). Every per-upstream series is labelled index
// (the upstream's position in the configuration's enabled upstreams) and url
// (redacted: scheme, host and port only), and pool: "" for the main pool,
// a group's name for its own (docs/filter.md "Per-group upstreams"), so
// the label is bounded by the configuration's groups. Budget exhaustion is a fact about
// the pool (docs/design.md#lesson-attribution), so it has no upstream label at all.
var (
	upstreamLabels = []string{"index", "url", "pool"}

	upstreamInFlight = prometheus.NewDesc("nxdns_upstream_in_flight",
		"Exchanges running now against this upstream, sampled at scrape time. Equal to nxdns_upstream_slots means saturated: new queries go to the next upstream or wait.",
		upstreamLabels, nil)
	upstreamSlots = prometheus.NewDesc("nxdns_upstream_slots",
		"Exchanges this upstream may run at once (compiled, not configurable).",
		upstreamLabels, nil)
	upstreamQueued = prometheus.NewDesc("nxdns_upstream_queued_total",
		"Queries that waited for a slot because every eligible upstream was saturated, counted once per wait on the upstream it ended on, whether it got a slot, ran out of budget or was cancelled. Approximate; sampled at admission.",
		upstreamLabels, nil)
	upstreamQueuedSeconds = prometheus.NewDesc("nxdns_upstream_queued_seconds_total",
		"Seconds queries spent waiting for a slot (the waits of nxdns_upstream_queued_total). Approximate; sampled at admission.",
		upstreamLabels, nil)
	upstreamReuseRecoveries = prometheus.NewDesc("nxdns_upstream_reuse_recoveries_total",
		"Exchanges retried once on a fresh connection because the upstream had closed the reused one (DoT). Not failures, but each costs a new connection and handshake.",
		upstreamLabels, nil)
	upstreamConnections = prometheus.NewDesc("nxdns_upstream_connections_total",
		"Connections dialed to this upstream (DoT, DoH), by outcome: new (a full TLS handshake), resumed (TLS session resumption) or failed (refused, timed out, certificate or handshake error, or cut short by the query that started it). A steady rise of new or resumed under steady load is connection churn.",
		[]string{"index", "url", "outcome", "pool"}, nil)
	upstreamZeroRTT = prometheus.NewDesc("nxdns_upstream_zero_rtt_total",
		"DoQ connections that sent queries in 0-RTT (a resumed session whose ticket allows early data), by the server's answer: accepted, or rejected (each query in it was sent again once in 1-RTT).",
		[]string{"index", "url", "outcome", "pool"}, nil)
	upstreamRequests = prometheus.NewDesc("nxdns_upstream_requests_total",
		"Attempts recorded in this upstream's health, by outcome: success (it answered) or failure (refused, reset, TLS or response error, REFUSED/NOTIMP, or no answer within a full attempt_timeout). Attempts cut short by the query's budget or a cancellation, and SERVFAIL answers, count in neither.",
		[]string{"index", "url", "outcome", "pool"}, nil)
	upstreamProbes = prometheus.NewDesc("nxdns_upstream_probes_total",
		"Background probes of this upstream (one at start-up and reload, then on the backoff schedule while it is in backoff), by outcome. A failed start-up probe puts the upstream in backoff before any query pays for it; probes count in neither outcome of nxdns_upstream_requests_total.",
		[]string{"index", "url", "outcome", "pool"}, nil)
	upstreamAttemptDuration = prometheus.NewDesc("nxdns_upstream_attempt_duration_seconds",
		"Duration of every attempt against this upstream, whatever its outcome, in seconds.",
		upstreamLabels, nil)
	upstreamBackoff = prometheus.NewDesc("nxdns_upstream_backoff",
		"1 while this upstream is in backoff (used only as a last resort and probed in the background until it answers), else 0.",
		upstreamLabels, nil)
	upstreamBackoffEpisodes = prometheus.NewDesc("nxdns_upstream_backoff_episodes_total",
		"Times this upstream entered backoff. A rise between two scrapes that nxdns_upstream_backoff did not catch is an outage shorter than the scrape interval; a steady rise is a flapping upstream.",
		upstreamLabels, nil)
	upstreamBudgetExhausted = prometheus.NewDesc("nxdns_upstream_budget_exhausted_total",
		"Queries that ran out of their own total budget (upstream.total_timeout_ms) waiting for a slot or in a shortened last attempt; answered SERVFAIL with EDE 22. Pool-wide: evidence about load and budget, never about one upstream.",
		[]string{"pool"}, nil)
)

// upstreamCollector reads the pools' Snapshots at scrape time: the main
// pool's and the groups' (nil: none).
type upstreamCollector struct {
	snap   func() upstream.Snapshot
	groups func() map[string]upstream.Snapshot
}

func (upstreamCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		upstreamInFlight, upstreamSlots, upstreamQueued, upstreamQueuedSeconds,
		upstreamReuseRecoveries, upstreamConnections, upstreamZeroRTT, upstreamRequests, upstreamProbes, upstreamAttemptDuration,
		upstreamBackoff, upstreamBackoffEpisodes, upstreamBudgetExhausted,
	} {
		ch <- d
	}
}

func (c upstreamCollector) Collect(ch chan<- prometheus.Metric) {
	collectPool(ch, c.snap(), "")
	if c.groups != nil {
		for name, s := range c.groups() {
			collectPool(ch, s, name)
		}
	}
}

// collectPool sends one pool's series, labelled pool.
func collectPool(ch chan<- prometheus.Metric, s upstream.Snapshot, pool string) {
	for _, u := range s.Upstreams {
		// The pool already redacts; redacting again here (through
		// Endpoint.Scrub, the one redaction) makes the metrics' promise (no
		// token in /metrics, docs/design.md#redaction) independent of it.
		index, url := strconv.Itoa(u.Index), upstream.RedactString(u.URL)
		send(ch, upstreamInFlight, prometheus.GaugeValue, float64(u.InFlight), index, url, pool)
		send(ch, upstreamSlots, prometheus.GaugeValue, float64(u.Slots), index, url, pool)
		send(ch, upstreamQueued, prometheus.CounterValue, float64(u.QueuedTotal), index, url, pool)
		send(ch, upstreamQueuedSeconds, prometheus.CounterValue, u.QueuedSeconds, index, url, pool)
		send(ch, upstreamReuseRecoveries, prometheus.CounterValue, float64(u.ReuseRecoveries), index, url, pool)
		send(ch, upstreamConnections, prometheus.CounterValue, float64(u.Dials.New), index, url, "new", pool)
		send(ch, upstreamConnections, prometheus.CounterValue, float64(u.Dials.Resumed), index, url, "resumed", pool)
		send(ch, upstreamConnections, prometheus.CounterValue, float64(u.Dials.Failed), index, url, "failed", pool)
		send(ch, upstreamZeroRTT, prometheus.CounterValue, float64(u.Dials.ZeroRTTAccepted), index, url, "accepted", pool)
		send(ch, upstreamZeroRTT, prometheus.CounterValue, float64(u.Dials.ZeroRTTRejected), index, url, "rejected", pool)
		send(ch, upstreamRequests, prometheus.CounterValue, float64(u.Successes), index, url, "success", pool)
		send(ch, upstreamRequests, prometheus.CounterValue, float64(u.Failures), index, url, "failure", pool)
		send(ch, upstreamProbes, prometheus.CounterValue, float64(u.ProbeSuccesses), index, url, "success", pool)
		send(ch, upstreamProbes, prometheus.CounterValue, float64(u.ProbeFailures), index, url, "failure", pool)
		sendHistogram(ch, upstreamAttemptDuration, u.AttemptLatency, index, url, pool)
		send(ch, upstreamBackoff, prometheus.GaugeValue, boolValue(u.InBackoff), index, url, pool)
		send(ch, upstreamBackoffEpisodes, prometheus.CounterValue, float64(u.BackoffEpisodes), index, url, pool)
	}
	send(ch, upstreamBudgetExhausted, prometheus.CounterValue, float64(s.BudgetExhausted), pool)
}
