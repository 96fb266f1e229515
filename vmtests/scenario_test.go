package vmtests

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/burst"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"

	dto "github.com/prometheus/client_model/go"
)

// transports runs a scenario over DoT and over DoH.
var transports = []struct {
	name   string
	listen string // listen URL prefix of the fake upstream, port 0
}{
	{"DoT", "dot://127.0.0.1:0"},
	{"DoH", "doh://127.0.0.1:0/dns-query"},
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("scenario suite: builds and runs the real binary for seconds per case; not in -short (the Nix build)")
	}
}

// Scenario 1 (docs/design.md#burst-staircase, lesson 6): one upstream 30 ms
// of path away that takes 60 ms to resolve a name (a cache miss at a public
// resolver). 30 unique names at once resolve in about one query's latency —
// at most 1.3 times a single warm query — because they share the warm
// connection and none waits for a handshake. After the upstream closed the
// idle connection, a cold burst pays one TCP connect and one TLS 1.3
// handshake, two round trips, on top of the query: 150 ms against 90 ms in
// theory (1.67×), so at most twice a warm query with room for noise (the
// path is long enough that scheduling noise of a few milliseconds on a
// loaded machine does not decide the ratio). (Cold
// minus warm is two round trips whatever the server's speed: the ratio is
// within 2 only while resolving takes at least one round trip.)
func TestScenarioBurst(t *testing.T) {
	skipShort(t)
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ca := newTestCA(t)
			const idleClose = 300 * time.Millisecond
			path := scenarioPath
			path.RTT = 30 * time.Millisecond
			up := startUpstreamOn(t, ca, tr.listen+"?latency=60ms&idle_close="+idleClose.String(), path)
			p := startNxdns(t, ca, settings{}, up)
			testutil.WaitFor(t, "the start-up probe's answer", 10*time.Second, func() bool { return up.counts().Answered >= 1 })

			// Warm: the baseline's sequential queries keep the connection
			// open (each well inside idle_close), and the burst follows at
			// once. Two shared cores add scheduling noise of tens of
			// milliseconds to single runs, so the best of three is judged.
			var warm *burst.Report
			for range 3 {
				r := p.burst(t, nil)
				checkAllAnswered(t, "warm burst", r)
				t.Logf("%s warm burst: wall %.1f ms, p99 %.1f ms, baseline %.1f ms, ratio %.2f", tr.name, r.FirstWaveMS, r.P99MS, r.BaselineP50MS, r.StaircaseRatio)
				if warm == nil || r.StaircaseRatio < warm.StaircaseRatio {
					warm = r
				}
			}
			if warm.StaircaseRatio <= 0 || warm.StaircaseRatio > 1.3 {
				t.Errorf("%s warm burst: %.2f × one query's latency, want ≤ 1.3 (30 would be serial)", tr.name, warm.StaircaseRatio)
			}

			// Cold: time passing is the scenario (the upstream closes a
			// connection idle for idleClose); the handshake count proves each
			// burst did find the connection gone. Best of three, as above.
			best := 0.0
			for range 3 {
				time.Sleep(3 * idleClose)
				before := up.counts().Handshakes
				cold := p.burst(t, func(c *burst.Config) { c.Baseline = 0 })
				checkAllAnswered(t, "cold burst", cold)
				ratio := cold.FirstWaveMS / warm.BaselineP50MS
				handshakes := up.counts().Handshakes - before
				t.Logf("%s cold burst after idle close: wall %.1f ms, %.2f × a warm query; handshakes %d", tr.name, cold.FirstWaveMS, ratio, handshakes)
				if handshakes < 1 {
					t.Fatalf("cold burst: %d handshakes upstream, want ≥ 1 (the idle connection should have been closed)", handshakes)
				}
				if best == 0 || ratio < best {
					best = ratio
				}
			}
			if best > 2 {
				t.Errorf("%s cold burst: %.2f × a warm query, want ≤ 2 (one handshake shared by the burst)", tr.name, best)
			}
		})
	}
}

// checkAllAnswered fails unless every query of r got NOERROR.
func checkAllAnswered(t *testing.T, what string, r *burst.Report) {
	t.Helper()
	if r.Rcodes["NOERROR"] != r.Queries || r.Timeouts != 0 || r.Errors != 0 {
		t.Errorf("%s: %d queries, rcodes %v, %d timeouts, %d errors; want every one NOERROR", what, r.Queries, r.Rcodes, r.Timeouts, r.Errors)
	}
}

// Scenario 2 (docs/design.md#saturated-primary, lessons 2 and 7): every slot
// of the primary is held by stalled exchanges. A burst arriving meanwhile
// goes to the free standby at once, without queueing; then a burst of
// hundreds: nothing is dropped at the listener or lost, every answer lands
// well inside the budget (it queues for the standby's 32 slots, which is
// the pool's bound on one upstream, not a wait for the stalled primary),
// and the stalled queries fail over within their budget.
func TestScenarioSaturatedPrimary(t *testing.T) {
	skipShort(t)
	const hundreds = 300
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			ca := newTestCA(t)
			primary := startUpstream(t, ca, tr.listen+"?stall=1")
			standby := startUpstream(t, ca, tr.listen+"?latency=5ms")
			p := startNxdns(t, ca, settings{}, primary, standby)

			// Burst A: more queries than the primary has slots.
			n := upstream.DefaultSlots + 10
			first := make(chan *burst.Report, 1)
			go func() {
				first <- p.burst(t, func(c *burst.Config) { c.N = n; c.Baseline = 0 })
			}()
			// nxdns's own gauges, not the upstream's stalled count (that one
			// also counts the start-up probe, which holds no slot); and burst
			// A's overflow answered by the standby (its attempt counter
			// excludes probes), so B finds all 32 of the standby's slots
			// free. Without the last condition the wait can end while the
			// burst client has sent only the 32 queries that fill the
			// primary (its queries are goroutines; a loaded machine runs the
			// last ones late): its last 10 then reach the standby during B,
			// and 30 + 10 - 32 = 8 of B queue — the "queued_total = 8 after
			// burst B" of a cold full run.
			testutil.WaitFor(t, "the primary's slots to fill with stalled queries and the standby to answer the overflow", 10*time.Second, func() bool {
				m := p.metrics(t)
				return metric(m, "nxdns_upstream_in_flight", "index", "0") == float64(upstream.DefaultSlots) &&
					metric(m, "nxdns_listener_udp_in_flight") == float64(upstream.DefaultSlots) &&
					metric(m, "nxdns_upstream_requests_total", "index", "1", "outcome", "success") == float64(n-upstream.DefaultSlots)
			})
			// Burst B while the primary is saturated: the standby answers at once.
			during := p.burst(t, func(c *burst.Config) { c.Baseline = 0 })
			mB := p.metrics(t)
			queued := metric(mB, "nxdns_upstream_queued_total")
			// B ran inside the primary's stall if no stalled attempt had
			// expired by the end of B (2000 ms after A; B takes tens of
			// milliseconds, 200 ms on a machine loaded to 20): only then is
			// the standby B's alone, which is lesson 2's premise.
			inStall := metric(mB, "nxdns_upstream_requests_total", "index", "0", "outcome", "failure") == 0
			// Burst C, hundreds at once.
			many := p.burst(t, func(c *burst.Config) { c.N = hundreds; c.Baseline = 0 })
			a := <-first
			after := p.burst(t, func(c *burst.Config) { c.Baseline = 0 })

			t.Logf("%s saturated primary: burst A (%d) p50 %.1f max %.1f ms; B (30) during saturation p50 %.1f p99 %.1f ms; C (%d) p50 %.1f p99 %.1f max %.1f ms; after p50 %.1f p99 %.1f ms",
				tr.name, n, a.P50MS, a.MaxMS, during.P50MS, during.P99MS, hundreds, many.P50MS, many.P99MS, many.MaxMS, after.P50MS, after.P99MS)
			for name, r := range map[string]*burst.Report{"A": a, "B": during, "C": many, "after": after} {
				checkAllAnswered(t, "burst "+name, r)
			}
			// Lesson 2: the standby had free slots, so no query of B queued.
			switch {
			case !inStall:
				t.Logf("burst B outlasted the primary's 2000 ms stall (a machine slower than any seen): its stalled queries failed over during B, so queued_total (%v) is not lesson 2's to judge", queued)
			case queued != 0:
				t.Errorf("queued_total = %v after burst B, want 0: the standby had free slots", queued)
			}
			// "Fast" is shaped: the standby's 5 ms plus the 30 ms path, far
			// from the 2000 ms attempt budget a query on the primary spends.
			if during.P99MS > 500 {
				t.Errorf("burst B: p99 %.1f ms, want well under the 2000 ms attempt budget", during.P99MS)
			}
			// Hundreds pass the standby's 32 slots in waves of one round
			// trip each: well inside half the budget.
			if many.P99MS > 2000 {
				t.Errorf("burst C (%d): p99 %.1f ms, want well inside the 4000 ms budget", hundreds, many.P99MS)
			}
			// Burst A's stalled queries fail over after one attempt budget,
			// inside their 4000 ms total.
			if a.MaxMS > 4000 {
				t.Errorf("burst A max %.1f ms: a query outlived its budget", a.MaxMS)
			}

			m := p.metrics(t)
			if got := metric(m, "nxdns_listener_dropped_total"); got > 0 {
				t.Errorf("listener dropped %v queries of ordinary bursts, want 0 (docs/design.md#lesson-bursts)", got)
			}
			if got := metric(m, "nxdns_upstream_budget_exhausted_total"); got != 0 {
				t.Errorf("budget_exhausted_total = %v, want 0", got)
			}
			if got := metric(m, "nxdns_upstream_requests_total", "index", "0", "outcome", "failure"); got < float64(upstream.DefaultSlots) {
				t.Errorf("primary failures = %v, want ≥ %d (every stalled attempt expired)", got, upstream.DefaultSlots)
			}
			wantAnswered := float64(n + 30 + hundreds + 30)
			if got := metric(m, "nxdns_upstream_requests_total", "index", "1", "outcome", "success"); got < wantAnswered {
				t.Errorf("standby successes = %v, want ≥ %v (every query ended there)", got, wantAnswered)
			}
		})
	}
}

// Scenario 3: at the shipped defaults (attempt 2000 ms, total 4000 ms) a
// primary that stalls every attempt costs one attempt budget only until its
// start-up probe puts it in backoff; the standby answers every query, and
// the journal shows one backoff episode, not a line per query.
func TestScenarioFastStandby(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	primary := startUpstream(t, ca, "dot://127.0.0.1:0?stall=1")
	standby := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{queryLog: true}, primary, standby)

	early := p.burst(t, func(c *burst.Config) { c.N = 10; c.Baseline = 0 })
	testutil.WaitFor(t, "the primary to enter backoff", 10*time.Second, func() bool {
		return metric(p.metrics(t), "nxdns_upstream_backoff", "index", "0") == 1
	})
	late := p.burst(t, func(c *burst.Config) { c.Baseline = 0 })
	t.Logf("fast standby: before backoff p50 %.1f max %.1f ms; in backoff p50 %.1f p99 %.1f max %.1f ms",
		early.P50MS, early.MaxMS, late.P50MS, late.P99MS, late.MaxMS)

	for name, r := range map[string]*burst.Report{"early": early, "late": late} {
		if r.Rcodes["NOERROR"] != r.Queries || r.Timeouts != 0 {
			t.Errorf("%s: rcodes %v, %d timeouts; want every query answered", name, r.Rcodes, r.Timeouts)
		}
	}
	// The standby's answer is one 30 ms round trip away; 150 ms is the
	// margin, far below the 2000 ms a query on the primary would cost.
	if late.P99MS > 150 {
		t.Errorf("in backoff: p99 %.1f ms, want ≤ 150 ms (the primary is skipped)", late.P99MS)
	}
	// nxdns writes each line after its answer leaves, and this test reads
	// nxdns's stderr through a pipe: wait for the count, in any order.
	standbyLine := []string{"server.query", `"upstream": "` + standby.url + `"`}
	testutil.WaitFor(t, fmt.Sprintf("the query log to name the standby on every one of %d answers", early.Queries+late.Queries), 10*time.Second, func() bool {
		return p.logs.count(standbyLine...) >= early.Queries+late.Queries
	})
	if got := p.logs.count("server.query", `"upstream": "`+primary.url+`"`); got != 0 {
		t.Errorf("query log names the stalled primary on %d lines; it answered nothing", got)
	}
	if got := p.logs.count("upstream entering backoff"); got != 1 {
		t.Errorf("backoff episodes logged: %d, want exactly 1\n%s", got, p.logs.String())
	}
}

// Scenario 4 (docs/design.md#lesson-yield-first): every upstream
// stalls, at the shipped defaults. Each query gets SERVFAIL with an Extended
// DNS Error before the 5 s after which glibc, musl, dig and kdig give up on
// the try. The first queries find the primary in service and spend one full
// attempt (2000 ms) on it; by then the start-up probes have put both in
// backoff, so the rest of the query is the all-down pass (one probe
// timeout): about 3 s, EDE 23. A query that spent its whole budget would
// answer at 4 s with EDE 22; either is before the stubs give up.
func TestScenarioEverythingStalls(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	a := startUpstream(t, ca, "dot://127.0.0.1:0?stall=1")
	b := startUpstream(t, ca, "dot://127.0.0.1:0?stall=1")
	p := startNxdns(t, ca, settings{}, a, b)

	r := p.burst(t, func(c *burst.Config) { c.N = 10; c.Baseline = 0 })
	t.Logf("everything stalls at the defaults: p50 %.1f ms, max %.1f ms, rcodes %v, ede %v", r.P50MS, r.MaxMS, r.Rcodes, r.EDE)
	if r.Rcodes["SERVFAIL"] != 10 || r.Timeouts != 0 {
		t.Fatalf("rcodes %v, %d timeouts; want 10 SERVFAIL and no client timeout", r.Rcodes, r.Timeouts)
	}
	if r.EDE["22"]+r.EDE["23"] != 10 {
		t.Errorf("EDE %v, want 22 (budget) or 23 (network error) on all 10", r.EDE)
	}
	// The budget (4000 ms) bounds every query; 500 ms is the answer margin
	// of docs/reference/configuration.md, and still before the stubs' 5 s.
	if r.MaxMS >= 4500 {
		t.Errorf("slowest SERVFAIL after %.1f ms, want within the 4000 ms budget plus 500 ms, before the stubs' 5000 ms", r.MaxMS)
	}
}

// Scenario 4b (docs/design.md#pool-last-resort): every upstream is down — black-holed, so
// each connection attempt hangs rather than fails — and already in backoff
// (their start-up probes failed). A query does not spend its 4000 ms budget
// on the dead: it is answered SERVFAIL with EDE 23 within about one probe
// timeout, while the background prober keeps trying.
func TestScenarioEverythingDown(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	a := startUpstream(t, ca, "dot://127.0.0.1:0?stall=1")
	b := startUpstream(t, ca, "doh://127.0.0.1:0/dns-query?stall=1")
	p := startNxdns(t, ca, settings{}, a, b)
	testutil.WaitFor(t, "both upstreams to be in backoff", 10*time.Second, func() bool {
		return metric(p.metrics(t), "nxdns_upstream_backoff") == 2
	})

	r := p.burst(t, func(c *burst.Config) { c.N = 10; c.Baseline = 0 })
	t.Logf("everything down: p50 %.1f ms, max %.1f ms, rcodes %v, ede %v", r.P50MS, r.MaxMS, r.Rcodes, r.EDE)
	if r.Rcodes["SERVFAIL"] != 10 || r.Timeouts != 0 {
		t.Fatalf("rcodes %v, %d timeouts; want 10 SERVFAIL", r.Rcodes, r.Timeouts)
	}
	if r.EDE["23"] != 10 {
		t.Errorf("EDE %v, want info code 23 (network error) on all 10", r.EDE)
	}
	// One probe timeout (1000 ms) for the whole last-resort pass, plus the
	// margin of two shared cores: about 1.5 s, not the 4 s budget.
	if r.MaxMS > 1500 {
		t.Errorf("slowest SERVFAIL after %.1f ms, want within about one probe timeout (≤ 1500 ms)", r.MaxMS)
	}
}

// Scenario 5: the upstream closes connections idle for 200 ms and queries
// come 500 ms apart, so every query after the first finds its connection
// closed by the peer. None fails: a connection the client already saw close
// is replaced before use, and one that closes under an exchange is retried
// once on a fresh connection (reuse_recoveries_total). TLS session
// resumption keeps each redial cheap.
func TestScenarioIdleClose(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0?idle_close=200ms")
	p := startNxdns(t, ca, settings{}, up)

	r := p.burst(t, func(c *burst.Config) { c.Rate = 2; c.Duration = 3 * time.Second; c.Baseline = 0; c.N = 0; c.Waves = 0 })
	m := p.metrics(t)
	c := up.counts()
	recoveries := metric(m, "nxdns_upstream_reuse_recoveries_total")
	t.Logf("idle close: %d queries, p50 %.1f ms, p99 %.1f ms, max %.1f ms; upstream connections %d, handshakes %d; reuse recoveries %v",
		r.Queries, r.P50MS, r.P99MS, r.MaxMS, c.Connections, c.Handshakes, recoveries)
	if r.Queries < 5 || r.Rcodes["NOERROR"] != r.Queries || r.Timeouts != 0 {
		t.Fatalf("%d queries: rcodes %v, %d timeouts; want every one answered", r.Queries, r.Rcodes, r.Timeouts)
	}
	if got := metric(m, "nxdns_upstream_requests_total", "outcome", "failure"); got != 0 {
		t.Errorf("upstream failures = %v, want 0: a peer closing an idle connection is not a fault", got)
	}
	// Each query after the first needed a new connection: the idle ones were
	// closed by the peer in between.
	if c.Connections < uint64(r.Queries) {
		t.Errorf("upstream accepted %d connections for %d queries 500 ms apart; want one per query", c.Connections, r.Queries)
	}
}

// Scenario 5b: the upstream closes each connection, unanswered, when its
// second query arrives — the stale-connection case of docs/design.md#stale-connection made
// deterministic (the connection was reused, no byte of the answer came, the
// cause is EOF). Every query is still answered: each is retried once on a
// fresh connection, counted in reuse_recoveries_total, and nothing is
// recorded against the upstream's health.
func TestScenarioStaleConnectionRecovery(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0?close_on_query=2")
	p := startNxdns(t, ca, settings{}, up)

	// The start-up probe opens the first connection; wait for its answer so
	// the first query reuses that connection like every later one.
	testutil.WaitFor(t, "the start-up probe's answer", 10*time.Second, func() bool { return up.counts().Answered >= 1 })
	// One query at a time, so each reuses the connection the one before
	// opened (concurrent queries would share a connection still being
	// dialed, which is not "reused" and not retried).
	r := p.burst(t, func(c *burst.Config) { c.N = 1; c.Waves = 10; c.Baseline = 0 })
	m := p.metrics(t)
	recoveries := metric(m, "nxdns_upstream_reuse_recoveries_total")
	t.Logf("stale recovery: %d queries, p50 %.1f ms, max %.1f ms; upstream connections %d; reuse recoveries %v",
		r.Queries, r.P50MS, r.MaxMS, up.counts().Connections, recoveries)
	if r.Rcodes["NOERROR"] != r.Queries || r.Timeouts != 0 {
		t.Fatalf("rcodes %v, %d timeouts; want every query answered", r.Rcodes, r.Timeouts)
	}
	// Every query meets a connection that closes under it.
	if recoveries != float64(r.Queries) {
		t.Errorf("reuse_recoveries_total = %v, want %d (one per query)", recoveries, r.Queries)
	}
	if got := up.counts().Connections; got != uint64(r.Queries+1) {
		t.Errorf("upstream connections = %d, want %d (the probe's, then one fresh per retry)", got, r.Queries+1)
	}
	if got := metric(m, "nxdns_upstream_requests_total", "outcome", "failure"); got != 0 {
		t.Errorf("upstream failures = %v, want 0: a recovered exchange records nothing against health", got)
	}
	if got := metric(m, "nxdns_upstream_backoff"); got != 0 {
		t.Errorf("backoff = %v, want 0", got)
	}
}

// Scenario 6 (docs/design.md#robustness): a UDP flood from loopback, well above the listener's
// cap, for a bounded time. The upstream (one round trip away, 32 slots)
// answers about a thousand queries a second; the flood sends eight, so its
// queries pile up at the listener. The queries in flight stay at the cap
// (1024), the excess is dropped and counted, memory stays bounded (measured
// here: a few MiB above the idle process), and a normal query is answered
// during the flood — over TCP, whose cap the flood does not touch, within a
// stub's 5 s (it queues for the upstream with the flood's; one flooding
// host's share of the UDP cap is the robustness issue's) — and over UDP
// after it.
func TestScenarioUDPFlood(t *testing.T) {
	skipShort(t)
	const (
		floodFor  = 3 * time.Second
		floodRate = 8000 // queries a second, eight times what the upstream's slots pass
		maxRSS    = 256 << 20
	)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{}, up)
	testutil.WaitFor(t, "the start-up probe's answer", 10*time.Second, func() bool { return up.counts().Answered >= 1 })
	before := p.rssBytes(t)

	conn, err := net.Dial("udp", p.dns)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() { // drain answers so the flooder's socket never blocks anything
		buf := make([]byte, 4096)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	floodDone := make(chan int, 1)
	go func() {
		sent := 0
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		end := time.Now().Add(floodFor)
		for time.Now().Before(end) {
			<-tick.C
			for range floodRate / 100 {
				m := new(dns.Msg).SetQuestion(fmt.Sprintf("flood-%d.example.", sent), dns.TypeA)
				wire, _ := m.Pack()
				conn.Write(wire)
				sent++
			}
		}
		floodDone <- sent
	}()

	var peak int64
	var tcpTook time.Duration
	tcpAnswered := false
	sample := time.NewTicker(100 * time.Millisecond)
	defer sample.Stop()
	var sent int
	for sent == 0 {
		select {
		case sent = <-floodDone:
		case <-sample.C:
			peak = max(peak, p.rssBytes(t))
			if !tcpAnswered && floodDrops(p.metrics(t)) > 0 {
				c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
				r, took, err := c.Exchange(new(dns.Msg).SetQuestion("normal-tcp.example.", dns.TypeA), p.dns)
				tcpTook = took
				if err != nil || r.Rcode != dns.RcodeSuccess {
					t.Errorf("a normal TCP query during the flood: %v, %v; want an answer", r, err)
				}
				tcpAnswered = true
			}
		}
	}
	m := p.metrics(t)
	dropped := floodDrops(m)
	t.Logf("UDP flood: %d queries in %v; dropped over capacity or the client's share %v; RSS before %.1f MiB, peak %.1f MiB; a TCP query during it answered in %v",
		sent, floodFor, dropped, float64(before)/(1<<20), float64(peak)/(1<<20), tcpTook.Round(time.Millisecond))
	if dropped == 0 {
		t.Errorf("no query dropped: the flood (%d qps) reached neither the cap nor its client's share", floodRate)
	}
	if !tcpAnswered {
		t.Error("the flood never reached a bound while it ran, so no query was sent during it")
	}
	if peak > maxRSS {
		t.Errorf("peak RSS %.1f MiB, want ≤ %d MiB: the cap bounds memory", float64(peak)/(1<<20), maxRSS>>20)
	}
	// After: the queries the flood left in flight end within their budget
	// (most queued for the upstream's 32 slots and answer SERVFAIL, EDE
	// 22), then UDP serves as before.
	testutil.WaitFor(t, "the flood's queries in flight to end", 10*time.Second, func() bool {
		return metric(p.metrics(t), "nxdns_listener_udp_in_flight") == 0
	})
	r := p.burst(t, func(c *burst.Config) { c.N = 30; c.Baseline = 0 })
	checkAllAnswered(t, "a burst after the flood", r)
}

// floodDrops is what the listener dropped of a flood from one source: over
// the family's cap, or over that client's share of it (internal/server
// capacity.go), whichever it reached first.
func floodDrops(m map[string]*dto.MetricFamily) float64 {
	return metric(m, "nxdns_listener_dropped_total", "reason", "udp_over_capacity") +
		metric(m, "nxdns_listener_dropped_total", "reason", "udp_client_share")
}
