package web

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/logging"
	"github.com/nxdns/nxdns/internal/metrics"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// router is the composition root's routing in miniature: forward zones by
// longest suffix, the pool for everything else.
type router struct {
	pool  *upstream.Pool
	zones *forward.Table
}

func (r router) Route(qname string) (server.Resolver, string) {
	if z, ok := r.zones.Match(qname); ok {
		return z, "zone:" + z.Name()
	}
	return r.pool, "pool"
}

// scenario is a real pool, server and zone table that have done known
// work, served by a real web server, with every log line kept.
type scenario struct {
	pool    *upstream.Pool
	srv     *server.Server
	zones   *forward.Table
	web     *Server
	journal *lockedBuffer // every line as journald would receive it
	logs    *observer.ObservedLogs
}

// runScenario builds everything on loopback and drives it:
//
//   - 7 queries answered by the primary through the server (one of them
//     recovering a stale connection, one over TCP);
//   - 1 query whose budget runs out: the primary stalls a full attempt, the
//     standby gets a truncated one (budget_exhausted 1, SERVFAIL);
//   - 2 held queries saturate both upstreams (1 slot each) while a third,
//     whose client has already gone, queues and is counted;
//   - 3 queries both upstreams refuse, interleaved with answered ones, so
//     the standby (DoH, token in its URL) enters backoff and the primary
//     does not;
//   - forward zones: an answer, a TC=1 answer retried over TCP, and a
//     resolver that hangs up (a failure);
//   - one malformed datagram.
//
// The pool is not started: without probers, health changes only through
// these queries, so the end state is exact.
func runScenario(t *testing.T) *scenario {
	t.Helper()
	sc := &scenario{journal: new(lockedBuffer)}
	obsCore, logs := observer.New(zapcore.DebugLevel)
	sc.logs = logs
	journal := logging.New(logging.Options{Level: zap.NewAtomicLevelAt(zap.DebugLevel), Journal: true, Out: sc.journal})
	log := zap.New(zapcore.NewTee(obsCore, journal.Core()))

	primary, standby := newFake(dotURL), newFake(secretURL)
	// The attempt budget is far above the few statements that run while the
	// held queries hold their slots; the total leaves the stalled query's
	// standby attempt a truncated 200 ms.
	sc.pool = newPool(t, upstream.Options{Attempt: 2 * time.Second, Total: 2200 * time.Millisecond, Logger: log}, primary, standby)

	lan := startLANResolver(t)
	hangup := startHangup(t)
	zones, err := forward.NewTable([]config.ForwardZone{
		{Zone: "lan", Resolver: "udp://" + lan},
		{Zone: "broken", Resolver: "tcp://" + hangup},
	}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sc.zones = zones

	sc.srv = server.New(server.Options{Logger: log}, &server.State{
		Router:   router{sc.pool, zones},
		Allow:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		QueryLog: true,
	})
	if err := sc.srv.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sc.srv.Shutdown(ctx)
	})
	udpAddrs, tcpAddrs := sc.srv.Addrs()
	udp, tcp := udpAddrs[0].String(), tcpAddrs[0].String()

	reg := metrics.New(metrics.Sources{Pool: sc.pool.Snapshot, Server: sc.srv.Snapshot, Zones: zones.Snapshot})
	sc.web = New("127.0.0.1:0", reg, func() Health {
		u, _ := sc.srv.Addrs()
		return HealthFrom(sc.pool.Snapshot(), sc.srv.Snapshot(), len(u))
	}, log)
	if err := sc.web.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.web.Shutdown(context.Background()) })

	ask := func(network, addr, name string, rcode int) {
		t.Helper()
		c := &dns.Client{Net: network, Timeout: 10 * time.Second}
		resp, _, err := c.Exchange(newQuery(name), addr)
		if err != nil {
			t.Fatalf("%s %s: %v", network, name, err)
		}
		if resp.Rcode != rcode {
			t.Fatalf("%s %s: %s, want %s", network, name, dns.RcodeToString[resp.Rcode], dns.RcodeToString[rcode])
		}
	}

	for _, name := range []string{"ok.a.example.", "ok.b.example.", "ok.c.example.", "recover.d.example."} {
		ask("udp", udp, name, dns.RcodeSuccess)
	}
	ask("udp", udp, "stall.e.example.", dns.RcodeServerFailure)
	sc.queue(t, primary, standby)
	for i, name := range []string{"fail.f.example.", "ok.g.example.", "fail.h.example.", "ok.i.example.", "fail.j.example."} {
		ask("udp", udp, name, []int{dns.RcodeServerFailure, dns.RcodeSuccess}[i%2])
	}
	ask("tcp", tcp, "ok.k.example.", dns.RcodeSuccess)
	ask("udp", udp, "www.lan.", dns.RcodeSuccess)
	ask("udp", udp, "big.lan.", dns.RcodeSuccess)
	ask("udp", udp, "nas.broken.", dns.RcodeServerFailure)

	garbage, err := net.Dial("udp", udp)
	if err != nil {
		t.Fatal(err)
	}
	garbage.Write([]byte{0xde, 0xad, 0xbe}) // shorter than a header: dropped unanswered
	garbage.Close()

	testutil.WaitFor(t, "the malformed datagram counted and every connection closed", 10*time.Second, func() bool {
		s := sc.srv.Snapshot()
		return s.Malformed == 1 && s.TCPConns == 0 && s.UDPInFlight == 0
	})
	return sc
}

// queue saturates both upstreams with held queries, runs a query whose
// client is already gone (it must wait: no slot is free), then lets the
// held queries answer. The wait is counted once, on the primary.
func (sc *scenario) queue(t *testing.T, primary, standby *fakeUpstream) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, f := range []*fakeUpstream{primary, standby} {
		wg.Go(func() { _, _, errs[i] = sc.pool.Resolve(context.Background(), newQuery("hold.example.")) })
		<-f.entered // held on f: the next query finds the next slot taken
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := sc.pool.Resolve(gone, newQuery("ok.queued.example.")); upstream.Classify(err) != upstream.KindCanceled {
		t.Errorf("queued query: %v, want a cancellation", err)
	}
	close(primary.release)
	close(standby.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("held query %d: %v (were the slots held for longer than the attempt budget?)", i, err)
		}
	}
}

// scrape fetches /metrics over HTTP and parses the text exposition.
func (sc *scenario) scrape(t *testing.T) (map[string]*dto.MetricFamily, string) {
	t.Helper()
	code, hdr, body := get(t, sc.web, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: HTTP %d: %s", code, body)
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams, string(body)
}

// TestScrape_realComponents: /metrics over real HTTP shows, with the right
// type and value, what a real pool, server and zone table did.
func TestScrape_realComponents(t *testing.T) {
	sc := runScenario(t)
	fams, _ := sc.scrape(t)

	a := map[string]string{"index": "0", "url": dotURL, "pool": ""}
	b := map[string]string{"index": "1", "url": redactedDoH, "pool": ""}
	plus := func(m map[string]string, k, v string) map[string]string {
		out := maps.Clone(m)
		out[k] = v
		return out
	}
	lan := map[string]string{"zone": "lan.", "resolver": sc.zones.Zones()[0].URL()}
	broken := map[string]string{"zone": "broken.", "resolver": sc.zones.Zones()[1].URL()}
	none := map[string]string{}
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	cases := []struct {
		name   string
		typ    dto.MetricType
		labels map[string]string
		want   float64
	}{
		{"nxdns_upstream_slots", gauge, a, 1},
		{"nxdns_upstream_slots", gauge, b, 1},
		{"nxdns_upstream_in_flight", gauge, a, 0},
		{"nxdns_upstream_queued_total", counter, a, 1},
		{"nxdns_upstream_queued_total", counter, b, 0},
		{"nxdns_upstream_reuse_recoveries_total", counter, a, 1},
		{"nxdns_upstream_reuse_recoveries_total", counter, b, 0},
		// primary: 4 + held + 2 + TCP answered; stall + 3 refusals failed
		{"nxdns_upstream_requests_total", counter, plus(a, "outcome", "success"), 8},
		{"nxdns_upstream_requests_total", counter, plus(a, "outcome", "failure"), 4},
		// standby: held answered; 3 refusals; its truncated attempt in neither
		{"nxdns_upstream_requests_total", counter, plus(b, "outcome", "success"), 1},
		{"nxdns_upstream_requests_total", counter, plus(b, "outcome", "failure"), 3},
		{"nxdns_upstream_backoff", gauge, a, 0},
		{"nxdns_upstream_backoff", gauge, b, 1},
		{"nxdns_upstream_budget_exhausted_total", counter, map[string]string{"pool": ""}, 1},
		{"nxdns_queries_total", counter, map[string]string{"source": "pool", "rcode": "NOERROR"}, 7},
		{"nxdns_queries_total", counter, map[string]string{"source": "pool", "rcode": "SERVFAIL"}, 4},
		{"nxdns_queries_total", counter, map[string]string{"source": "zone:lan.", "rcode": "NOERROR"}, 2},
		{"nxdns_queries_total", counter, map[string]string{"source": "zone:broken.", "rcode": "SERVFAIL"}, 1},
		{"nxdns_listener_udp_in_flight", gauge, none, 0},
		{"nxdns_listener_tcp_connections", gauge, none, 0},
		{"nxdns_listener_dropped_total", counter, map[string]string{"reason": "malformed"}, 1},
		{"nxdns_listener_dropped_total", counter, map[string]string{"reason": "udp_over_capacity"}, 0},
		{"nxdns_listener_tcp_refused_total", counter, map[string]string{"reason": "capacity"}, 0},
		{"nxdns_forward_queries_total", counter, lan, 2},
		{"nxdns_forward_tcp_fallbacks_total", counter, lan, 1},
		{"nxdns_forward_failures_total", counter, lan, 0},
		{"nxdns_forward_queries_total", counter, broken, 1},
		{"nxdns_forward_failures_total", counter, broken, 1},
	}
	for _, c := range cases {
		if got := fams[c.name].GetType(); got != c.typ {
			t.Errorf("%s: TYPE %v, want %v", c.name, got, c.typ)
		}
		if got := scalar(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}

	// Values the clock decides are checked against the components' own
	// snapshots, which are quiet now: the scrape must show exactly them.
	pool, srv := sc.pool.Snapshot(), sc.srv.Snapshot()
	if got := scalar(t, fams, "nxdns_upstream_queued_seconds_total", a); got != pool.Upstreams[0].QueuedSeconds {
		t.Errorf("queued_seconds_total = %v, want the pool's %v", got, pool.Upstreams[0].QueuedSeconds)
	}
	for name, c := range map[string]string{"idle": "TCPIdleClosed", "slow": "TCPSlowClosed"} {
		want := map[string]uint64{"TCPIdleClosed": srv.TCPIdleClosed, "TCPSlowClosed": srv.TCPSlowClosed}[c]
		if got := scalar(t, fams, "nxdns_listener_tcp_closed_total", map[string]string{"reason": name}); got != float64(want) {
			t.Errorf("tcp_closed_total{reason=%q} = %v, want %d", name, got, want)
		}
	}
	histograms := []struct {
		name   string
		labels map[string]string
		count  uint64 // attempts started / routed queries
		sum    float64
	}{
		{"nxdns_upstream_attempt_duration_seconds", a, 12, pool.Upstreams[0].AttemptLatency.Sum},
		{"nxdns_upstream_attempt_duration_seconds", b, 5, pool.Upstreams[1].AttemptLatency.Sum},
		{"nxdns_query_duration_seconds", none, 14, srv.Latency.Sum},
	}
	for _, h := range histograms {
		if got := fams[h.name].GetType(); got != dto.MetricType_HISTOGRAM {
			t.Errorf("%s: TYPE %v, want histogram", h.name, got)
			continue
		}
		m := find(t, fams, h.name, h.labels).GetHistogram()
		if m.GetSampleCount() != h.count || m.GetSampleSum() != h.sum {
			t.Errorf("%s%v: count %d sum %v, want %d and %v", h.name, h.labels, m.GetSampleCount(), m.GetSampleSum(), h.count, h.sum)
		}
		if n := len(m.GetBucket()); n < 10 {
			t.Errorf("%s%v: %d buckets", h.name, h.labels, n)
		}
	}
	if h := find(t, fams, "nxdns_upstream_attempt_duration_seconds", a).GetHistogram(); h.GetSampleSum() < 2 {
		t.Errorf("primary's attempt time %vs: the stalled full attempt alone took 2 s", h.GetSampleSum())
	}
	for _, want := range []string{"go_goroutines", "process_open_fds"} {
		if _, ok := fams[want]; !ok {
			t.Errorf("runtime family %s missing", want)
		}
	}
}

// TestScrape_secretNeverShown: the DoH token appears nowhere an operator
// looks: /metrics, /api/health, and every log line the pool and server
// wrote while the upstream failed (including its backoff episode line).
func TestScrape_secretNeverShown(t *testing.T) {
	sc := runScenario(t)
	_, metricsText := sc.scrape(t)
	_, _, health := get(t, sc.web, "/api/health")
	for where, text := range map[string]string{"/metrics": metricsText, "/api/health": string(health), "journal": sc.journal.String()} {
		for _, secret := range []string{secretMarker, "/dns-query"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains %q:\n%s", where, secret, text)
			}
		}
	}
	if !strings.Contains(metricsText, `url="`+redactedDoH+`"`) {
		t.Errorf("/metrics has no series for the DoH upstream under its redacted url %s", redactedDoH)
	}
	episodes := sc.logs.FilterMessage("upstream entering backoff").AllUntimed()
	if len(episodes) != 1 {
		t.Fatalf("%d backoff episode lines, want 1", len(episodes))
	}
	f := episodes[0].ContextMap()
	if f["upstream"] != redactedDoH || f["index"] != int64(1) || !strings.Contains(f["cause"].(string), "connection refused") {
		t.Errorf("backoff line fields %v, want the standby's redacted url, index 1 and the refusal", f)
	}
	var h Health
	if err := json.Unmarshal(health, &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != StatusDegraded || h.Listeners.Up != 1 || h.Upstreams.InBackoff != 1 {
		t.Errorf("health %+v, want degraded with 1 listener up and 1 upstream in backoff", h)
	}
}

// find returns the sample of family name whose labels are exactly labels.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mf, ok := fams[name]
	if !ok {
		t.Fatalf("/metrics has no family %s", name)
	}
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
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

func scalar(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(t, fams, name, labels)
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	return 0
}
