package metrics

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/upstream"
)

// TestCollectors_mapEverySnapshotField: each snapshot field lands in its
// series, with the series' type and labels, at the snapshot's value.
func TestCollectors_mapEverySnapshotField(t *testing.T) {
	fams := gatherNxdns(t, sampleSources())
	up0 := map[string]string{"index": "0", "url": "tls://192.0.2.1:853", "pool": ""}
	up1 := map[string]string{"index": "1", "url": "https://192.0.2.2:8443", "pool": ""}
	with := func(base map[string]string, k, v string) map[string]string {
		m := map[string]string{k: v}
		for bk, bv := range base {
			m[bk] = bv
		}
		return m
	}
	lan := map[string]string{"zone": "lan.", "resolver": "udp://192.168.1.1:53"}
	iot := map[string]string{"zone": "iot.lan.", "resolver": "tcp://192.168.2.1:53"}
	none := map[string]string{}
	mainPool := map[string]string{"pool": ""}
	cases := []struct {
		name   string
		typ    dto.MetricType
		labels map[string]string
		want   float64
	}{
		{"nxdns_upstream_in_flight", dto.MetricType_GAUGE, up0, 5},
		{"nxdns_upstream_slots", dto.MetricType_GAUGE, up1, 32},
		{"nxdns_upstream_queued_total", dto.MetricType_COUNTER, up0, 7},
		{"nxdns_upstream_queued_seconds_total", dto.MetricType_COUNTER, up1, 0.5},
		{"nxdns_upstream_reuse_recoveries_total", dto.MetricType_COUNTER, up0, 4},
		{"nxdns_upstream_connections_total", dto.MetricType_COUNTER, with(up0, "outcome", "new"), 12},
		{"nxdns_upstream_connections_total", dto.MetricType_COUNTER, with(up0, "outcome", "resumed"), 13},
		{"nxdns_upstream_connections_total", dto.MetricType_COUNTER, with(up0, "outcome", "failed"), 14},
		{"nxdns_upstream_requests_total", dto.MetricType_COUNTER, with(up0, "outcome", "success"), 100},
		{"nxdns_upstream_requests_total", dto.MetricType_COUNTER, with(up1, "outcome", "failure"), 11},
		{"nxdns_upstream_backoff", dto.MetricType_GAUGE, up0, 0},
		{"nxdns_upstream_backoff", dto.MetricType_GAUGE, up1, 1},
		{"nxdns_upstream_backoff_episodes_total", dto.MetricType_COUNTER, up1, 3},
		{"nxdns_upstream_budget_exhausted_total", dto.MetricType_COUNTER, mainPool, 2},
		// a group's own pool (docs/filter.md "Per-group upstreams"): the same series, labelled pool
		{"nxdns_upstream_requests_total", dto.MetricType_COUNTER, map[string]string{"index": "0", "url": "tls://192.0.2.3:853", "outcome": "success", "pool": "kids"}, 71},
		{"nxdns_upstream_budget_exhausted_total", dto.MetricType_COUNTER, map[string]string{"pool": "kids"}, 73},
		{"nxdns_rate_limited_total", dto.MetricType_COUNTER, none, 79},
		{"nxdns_rate_limit_devices", dto.MetricType_GAUGE, none, 83},
		{"nxdns_rate_limit_evicted_total", dto.MetricType_COUNTER, none, 89},
		{"nxdns_queries_total", dto.MetricType_COUNTER, map[string]string{"source": "pool", "rcode": "SERVFAIL"}, 6},
		{"nxdns_queries_total", dto.MetricType_COUNTER, map[string]string{"source": "refused", "rcode": "REFUSED"}, 13},
		{"nxdns_queries_total", dto.MetricType_COUNTER, map[string]string{"source": "zone:lan.", "rcode": "NXDOMAIN"}, 21},
		{"nxdns_listener_udp_in_flight", dto.MetricType_GAUGE, none, 3},
		{"nxdns_listener_tcp_connections", dto.MetricType_GAUGE, none, 2},
		{"nxdns_listener_dropped_total", dto.MetricType_COUNTER, map[string]string{"reason": "udp_over_capacity"}, 17},
		{"nxdns_listener_dropped_total", dto.MetricType_COUNTER, map[string]string{"reason": "malformed"}, 19},
		{"nxdns_listener_dropped_total", dto.MetricType_COUNTER, map[string]string{"reason": "udp_client_share"}, 53},
		{"nxdns_listener_dropped_total", dto.MetricType_COUNTER, map[string]string{"reason": "kernel_receive_queue"}, 59},
		{"nxdns_listener_dropped_total", dto.MetricType_COUNTER, map[string]string{"reason": "bad_source"}, 61},
		{"nxdns_listener_dropped_total", dto.MetricType_COUNTER, map[string]string{"reason": "undelivered"}, 73},
		{"nxdns_listener_tcp_refused_total", dto.MetricType_COUNTER, map[string]string{"reason": "capacity"}, 23},
		{"nxdns_listener_tcp_refused_total", dto.MetricType_COUNTER, map[string]string{"reason": "client_share"}, 67},
		{"nxdns_listener_tcp_refused_total", dto.MetricType_COUNTER, map[string]string{"reason": "not_allowed"}, 71},
		{"nxdns_log_dropped_total", dto.MetricType_COUNTER, none, 43},
		{"nxdns_listener_tcp_closed_total", dto.MetricType_COUNTER, map[string]string{"reason": "idle"}, 29},
		{"nxdns_listener_tcp_closed_total", dto.MetricType_COUNTER, map[string]string{"reason": "slow"}, 31},
		{"nxdns_forward_queries_total", dto.MetricType_COUNTER, lan, 41},
		{"nxdns_forward_failures_total", dto.MetricType_COUNTER, iot, 5},
		{"nxdns_forward_tcp_fallbacks_total", dto.MetricType_COUNTER, lan, 2},
		{"nxdns_config_reloads_total", dto.MetricType_COUNTER, map[string]string{"outcome": "success"}, 3},
		{"nxdns_config_reloads_total", dto.MetricType_COUNTER, map[string]string{"outcome": "failure"}, 2},
		{"nxdns_config_last_reload_successful", dto.MetricType_GAUGE, none, 0},
		{"nxdns_config_generation", dto.MetricType_GAUGE, none, 4},
		{"nxdns_config_loaded_timestamp_seconds", dto.MetricType_GAUGE, none, 1700000000.5},
		{"nxdns_filter_service_blocked_total", dto.MetricType_COUNTER, map[string]string{"service": "tiktok"}, 47},
		{"nxdns_filter_safe_search_total", dto.MetricType_COUNTER, map[string]string{"engine": "google"}, 53},
	}
	for _, c := range cases {
		if got := fams[c.name].GetType(); got != c.typ {
			t.Errorf("%s: type %v, want %v", c.name, got, c.typ)
		}
		if got := value(sample(t, fams, c.name, c.labels)); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := len(fams["nxdns_queries_total"].GetMetric()); n != 4 {
		t.Errorf("nxdns_queries_total has %d samples, want one per (source, rcode) pair: 4", n)
	}
	if n := len(fams["nxdns_forward_queries_total"].GetMetric()); n != 3 {
		t.Errorf("nxdns_forward_queries_total has %d samples, want one per zone: 3", n)
	}
}

// TestCollectors_histograms: the latency histograms keep the snapshot's
// count, sum and cumulative buckets, an observation past the last bound
// counting only in the total (+Inf).
func TestCollectors_histograms(t *testing.T) {
	fams := gatherNxdns(t, sampleSources())
	cases := []struct {
		name     string
		labels   map[string]string
		count    uint64
		sum      float64
		at25ms   uint64 // cumulative count at le=0.025
		atLastLe uint64 // cumulative count at le=5
	}{
		{"nxdns_upstream_attempt_duration_seconds", map[string]string{"index": "0", "url": "tls://192.0.2.1:853", "pool": ""}, 3, 6.043, 1, 2},
		{"nxdns_upstream_attempt_duration_seconds", map[string]string{"index": "1", "url": "https://192.0.2.2:8443", "pool": ""}, 1, 2.5, 0, 1},
		{"nxdns_query_duration_seconds", map[string]string{}, 2, 0.021, 2, 2},
	}
	for _, c := range cases {
		if typ := fams[c.name].GetType(); typ != dto.MetricType_HISTOGRAM {
			t.Fatalf("%s: type %v, want histogram", c.name, typ)
		}
		h := sample(t, fams, c.name, c.labels).GetHistogram()
		if h.GetSampleCount() != c.count || !near(h.GetSampleSum(), c.sum) {
			t.Errorf("%s%v: count %d sum %v, want %d and %v", c.name, c.labels, h.GetSampleCount(), h.GetSampleSum(), c.count, c.sum)
		}
		buckets := map[float64]uint64{}
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		if buckets[0.025] != c.at25ms || buckets[5] != c.atLastLe {
			t.Errorf("%s%v: buckets le=0.025 %d le=5 %d, want %d and %d", c.name, c.labels, buckets[0.025], buckets[5], c.at25ms, c.atLastLe)
		}
	}
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

// TestCollectors_budgetExhaustedHasNoUpstreamLabel: budget exhaustion is a
// fact about the pool (docs/design.md#lesson-attribution): no index, no url,
// only the pool's own label.
func TestCollectors_budgetExhaustedHasNoUpstreamLabel(t *testing.T) {
	fams := gatherNxdns(t, sampleSources())
	ms := fams["nxdns_upstream_budget_exhausted_total"].GetMetric()
	if len(ms) != 2 { // the main pool and the sample's group pool
		t.Fatalf("budget_exhausted_total samples %v, want one per pool", ms)
	}
	for _, m := range ms {
		if len(m.GetLabel()) != 1 || m.GetLabel()[0].GetName() != "pool" {
			t.Errorf("budget_exhausted_total sample %v, want one labelled pool only", m)
		}
	}
}

// TestNew_nilSourcesLeaveSeriesOut: a source left nil contributes no series,
// and the runtime collectors are there regardless.
func TestNew_nilSourcesLeaveSeriesOut(t *testing.T) {
	src := sampleSources()
	src.Pool, src.Zones = nil, nil
	fams := gatherFrom(t, New(src))
	for name := range fams {
		if strings.HasPrefix(name, "nxdns_upstream_") || strings.HasPrefix(name, "nxdns_forward_") {
			t.Errorf("family %s present with its source nil", name)
		}
	}
	for _, want := range []string{"nxdns_queries_total", "go_goroutines", "process_open_fds"} {
		if _, ok := fams[want]; !ok {
			t.Errorf("family %s missing", want)
		}
	}
}

// TestNew_ownRegistry: New registers nothing on Prometheus's global default,
// so two registries coexist (a reload, or tests) and no library's global
// metric leaks into /metrics.
func TestNew_ownRegistry(t *testing.T) {
	a, b := New(sampleSources()), New(sampleSources())
	if a == b {
		t.Fatal("New returned the same registry twice")
	}
	fams := gatherFrom(t, prometheus.DefaultGatherer)
	for name := range fams {
		if strings.HasPrefix(name, "nxdns_") {
			t.Errorf("%s is registered on the global default registry", name)
		}
	}
}

// TestCollectors_readAtScrapeTime: each scrape calls the source again, so a
// reload that swaps the pool shows at the next scrape without re-registering.
func TestCollectors_readAtScrapeTime(t *testing.T) {
	var budget uint64
	reg := New(Sources{Pool: func() upstream.Snapshot { return upstream.Snapshot{BudgetExhausted: budget} }})
	for _, want := range []uint64{0, 3, 8} {
		budget = want
		fams := gatherFrom(t, reg)
		if got := value(sample(t, fams, "nxdns_upstream_budget_exhausted_total", map[string]string{"pool": ""})); got != float64(want) {
			t.Errorf("budget_exhausted_total = %v, want %d", got, want)
		}
	}
}

// TestCollectors_invalidLabelCostsOneSeries: a label value that is not
// UTF-8 fails that sample, not the scrape: every other family is gathered.
func TestCollectors_invalidLabelCostsOneSeries(t *testing.T) {
	src := sampleSources()
	src.Zones = func() []forward.ZoneSnapshot {
		return []forward.ZoneSnapshot{{Zone: "bad\xffzone.", Resolver: "udp://192.168.1.1:53", Queries: 1}}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(nxdnsCollectors(src)...)
	mfs, err := reg.Gather()
	if err == nil {
		t.Fatal("gather reported no error for a non-UTF-8 label value")
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		got[mf.GetName()] = true
	}
	for _, want := range []string{"nxdns_upstream_in_flight", "nxdns_queries_total", "nxdns_listener_tcp_refused_total"} {
		if !got[want] {
			t.Errorf("family %s lost to another series' bad label", want)
		}
	}
}

// secretURL is a DoH upstream whose path carries an account token (docs/design.md#redaction).
const secretURL = "https://127.0.0.1:8443/dns-query/SECRET-TOKEN?key=SECRET-KEY"

// failingClient refuses every exchange with the error net/http would give,
// which prints the request URL.
type failingClient struct{}

func (failingClient) Exchange(context.Context, *dns.Msg) (*dns.Msg, error) {
	return nil, &url.Error{Op: "Post", URL: secretURL, Err: errors.New("connection refused")}
}
func (failingClient) Close() error { return nil }

// TestUpstream_urlRedacted: a DoH URL's path and query never reach
// /metrics, neither from a real pool nor from a snapshot that (by a bug
// elsewhere) carried the raw URL; the series is labelled scheme, host, port.
func TestUpstream_urlRedacted(t *testing.T) {
	ep, err := upstream.ParseEndpoint(secretURL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := upstream.New(upstream.Options{Attempt: time.Second, Total: 2 * time.Second},
		[]upstream.Member{{Endpoint: ep, Client: failingClient{}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for range 4 { // failures, then backoff and last-resort attempts
		p.Resolve(context.Background(), new(dns.Msg).SetQuestion("example.", dns.TypeA))
	}
	raw := func() upstream.Snapshot {
		s := p.Snapshot()
		s.Upstreams[0].URL = secretURL
		return s
	}
	for name, pool := range map[string]func() upstream.Snapshot{"pool": p.Snapshot, "raw snapshot": raw} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(nxdnsCollectors(Sources{Pool: pool})...)
		text := exposition(t, reg)
		for _, secret := range []string{"SECRET", "dns-query", "key="} {
			if strings.Contains(text, secret) {
				t.Errorf("%s: /metrics contains %q:\n%s", name, secret, text)
			}
		}
		fams := gatherFrom(t, reg)
		if f := value(sample(t, fams, "nxdns_upstream_requests_total",
			map[string]string{"index": "0", "url": "https://127.0.0.1:8443", "outcome": "failure", "pool": ""})); f < 1 {
			t.Errorf("%s: failures = %v, want the recorded failures under the redacted url", name, f)
		}
	}
}

// exposition is the text format a scrape would read.
func exposition(t testing.TB, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return buf.String()
}
