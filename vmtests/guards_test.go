package vmtests

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/burst"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/pathemu"
	"github.com/nxdns/nxdns/internal/testutil"
)

// Rebinding protection and per-group upstreams through the real binary
// (docs/protocol.md "Rebinding protection", docs/filter.md "Per-group
// upstreams"): fake upstreams whose answers are set per name, kdig from
// two loopback source addresses.

// rr parses one record for a fake upstream's answer.
func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// answering is a fake upstream answering each name with its records (a
// TEST-NET address for any other), counting the queries for each name.
func answering(t *testing.T, ca testCA, records map[string][]dns.RR) (*upstreamNode, func(string) int64) {
	t.Helper()
	var counts [16]atomic.Int64
	var names []string
	for n := range records {
		names = append(names, n)
	}
	count := func(name string) int64 {
		for i, n := range names {
			if n == name {
				return counts[i].Load()
			}
		}
		return -1
	}
	answer := func(_ context.Context, q *dns.Msg) *dns.Msg {
		m := new(dns.Msg).SetReply(q)
		name := q.Question[0].Name
		for i, n := range names {
			if n == name {
				counts[i].Add(1)
				for _, r := range records[n] {
					if r.Header().Rrtype == q.Question[0].Qtype || r.Header().Rrtype == dns.TypeCNAME {
						m.Answer = append(m.Answer, r)
					}
				}
				return m
			}
		}
		if q.Question[0].Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 80)}}
		}
		return m
	}
	up := startUpstreamWith(t, ca, "dot://127.0.0.1:0", pathemu.Path{}, func(c *fakeup.Config) {
		c.Listen[0].Hooks = &fakeup.Hooks{Answer: answer}
	})
	return up, count
}

func needKdig(t *testing.T) {
	t.Helper()
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
}

func TestRebindingThroughTheBinary(t *testing.T) {
	needKdig(t)
	ca := newTestCA(t)
	up, asked := answering(t, ca, map[string][]dns.RR{
		"rebind.example.":     {rr(t, "rebind.example. 300 IN A 192.168.1.1")},
		"mixed.example.":      {rr(t, "mixed.example. 300 IN A 198.51.100.5"), rr(t, "mixed.example. 300 IN A 10.0.0.5")},
		"chain.example.":      {rr(t, "chain.example. 300 IN CNAME x.cdn.example."), rr(t, "x.cdn.example. 300 IN A 127.0.0.1")},
		"v6.example.":         {rr(t, "v6.example. 300 IN AAAA fd00::1")},
		"nas.plex.example.":   {rr(t, "nas.plex.example. 300 IN A 192.168.1.9")},
		"public.example.":     {rr(t, "public.example. 300 IN A 198.51.100.1")},
		"later.example.":      {rr(t, "later.example. 300 IN A 10.9.9.9")},
		"shared.example.":     {rr(t, "shared.example. 300 IN A 100.64.1.1")},
		"to-allowed.example.": {rr(t, "to-allowed.example. 300 IN CNAME n.plex.example."), rr(t, "n.plex.example. 300 IN A 192.168.1.9")},
	})
	extra := fmt.Sprintf("[filter]\nstate_dir = %q\n", t.TempDir())
	p := startNxdns(t, ca, settings{queryLog: true, dns: "rebinding_allow = [\"plex.example\"]\n", extra: extra}, up)

	for _, c := range []struct{ name, qtype, want string }{
		{"rebind.example", "A", "SERVFAIL"},
		{"mixed.example", "A", "SERVFAIL"},      // public and private: refused whole
		{"chain.example", "A", "SERVFAIL"},      // the chain's end counts
		{"v6.example", "AAAA", "SERVFAIL"},      // unique local
		{"shared.example", "A", "SERVFAIL"},     // RFC 6598
		{"to-allowed.example", "A", "SERVFAIL"}, // a CNAME into an allowed name is still this name
		{"nas.plex.example", "A", "NOERROR"},    // allowed
		{"public.example", "A", "NOERROR"},
	} {
		out := p.kdig(t, "127.0.0.1", c.name, c.qtype, "+edns")
		if !strings.Contains(out, "status: "+c.want) {
			t.Errorf("%s %s: want %s\n%s", c.name, c.qtype, c.want, out)
			continue
		}
		if c.want == "SERVFAIL" && (!strings.Contains(out, "EDE: 15 (Blocked)") || !strings.Contains(out, "rebinding protection")) {
			t.Errorf("%s: refusal without EDE 15 naming rebinding protection\n%s", c.name, out)
		}
	}
	// Never cached: asked again, the upstream is asked again.
	before := asked("rebind.example.")
	p.kdig(t, "127.0.0.1", "rebind.example", "A", "+edns")
	if got := asked("rebind.example.") - before; got != 1 {
		t.Errorf("a refused answer was asked of the upstream %d times on the next query, want 1 (never cached)", got)
	}
	// The dashboard's allow button allows a name for rebinding too.
	if out := p.kdig(t, "127.0.0.1", "later.example", "A", "+edns"); !strings.Contains(out, "status: SERVFAIL") {
		t.Fatalf("later.example before allowing:\n%s", out)
	}
	p.post(t, "/api/filter/allow?name=later.example")
	if out := p.kdig(t, "127.0.0.1", "later.example", "A", "+edns"); !strings.Contains(out, "status: NOERROR") || !strings.Contains(out, "10.9.9.9") {
		t.Errorf("later.example after the dashboard allowed it:\n%s", out)
	}
	// The query log gives the reason; the metrics count it.
	testutil.WaitFor(t, "the query log line", 5*time.Second, func() bool {
		return p.logs.count(`"name": "rebind.example."`, `"source": "rebinding"`, `"ede": 15`) > 0
	})
	if n := metric(p.metrics(t), "nxdns_queries_total", "source", "rebinding"); n < 7 {
		t.Errorf("nxdns_queries_total{source=rebinding} = %v, want at least 7", n)
	}
}

func TestGroupUpstreamsThroughTheBinary(t *testing.T) {
	needKdig(t)
	ca := newTestCA(t)
	main, mainAsked := answering(t, ca, map[string][]dns.RR{"video.example.": {rr(t, "video.example. 300 IN A 198.51.100.1")}})
	family, familyAsked := answering(t, ca, map[string][]dns.RR{"video.example.": {rr(t, "video.example. 300 IN A 203.0.113.1")}})
	extra := fmt.Sprintf(`[[upstreams]]
url = %q
tls_name = "upstream.test"
ca_file = %q
enabled = false

[[filter.groups]]
name = "kids"
clients = ["127.0.0.2"]
upstreams = [%q]
`, family.url, ca.file, family.url)
	p := startNxdns(t, ca, settings{queryLog: true, extra: extra}, main)
	// Three rounds: a miss, a hit through the chain, a hit from the wire.
	for range 3 {
		if out := p.kdig(t, "127.0.0.1", "video.example", "A"); !strings.Contains(out, "198.51.100.1") || strings.Contains(out, "203.0.113.1") {
			t.Errorf("main-pool client:\n%s", out)
		}
		if out := p.kdig(t, "127.0.0.2", "video.example", "A"); !strings.Contains(out, "203.0.113.1") || strings.Contains(out, "198.51.100.1") {
			t.Errorf("kids client:\n%s", out)
		}
	}
	if m, f := mainAsked("video.example."), familyAsked("video.example."); m != 1 || f != 1 {
		t.Errorf("the main upstream was asked %d times, the family one %d; want 1 each", m, f)
	}
	fams := p.metrics(t)
	if n := metric(fams, "nxdns_upstream_requests_total", "pool", "kids", "outcome", "success"); n < 1 {
		t.Errorf("nxdns_upstream_requests_total{pool=kids,outcome=success} = %v", n)
	}
	testutil.WaitFor(t, "the query log line", 5*time.Second, func() bool {
		return p.logs.count(`"client": "127.0.0.2"`, `"pool": "kids"`) > 0
	})
}

// TestRateLimitThroughTheBinary: with the shipped limit and the host not
// exempt, a phone's wake-up burst (300 names at once) is answered in full;
// the same source then sending 3000 more at once is refused past its
// bucket with EDE 18, counted.
func TestRateLimitThroughTheBinary(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{dns: "rate_limit_exempt = []\n"}, up)
	wake := p.burst(t, func(c *burst.Config) { c.N, c.Waves, c.Baseline = wakeUp, 1, 0 })
	if wake.Rcodes["NOERROR"] != wakeUp || wake.Rcodes["REFUSED"] != 0 {
		t.Fatalf("wake-up burst of %d: rcodes %v, timeouts %d", wakeUp, wake.Rcodes, wake.Timeouts)
	}
	t.Logf("wake-up burst of %d: %.0f ms wall, p50 %.1f ms, p99 %.1f ms, none refused", wakeUp, wake.WallMS, wake.P50MS, wake.P99MS)
	flood := p.burst(t, func(c *burst.Config) { c.N, c.Waves, c.WaveGap, c.Baseline = 1000, 3, 0, 0 })
	if flood.Rcodes["REFUSED"] == 0 || flood.EDE["18"] == 0 {
		t.Errorf("a flood of 3000 after the burst: rcodes %v, EDE %v; want REFUSED with EDE 18", flood.Rcodes, flood.EDE)
	}
	t.Logf("then a flood of 3000: rcodes %v", flood.Rcodes)
	if n := metric(p.metrics(t), "nxdns_rate_limited_total"); n != float64(flood.Rcodes["REFUSED"]) {
		t.Errorf("nxdns_rate_limited_total = %v, want the %d refused", n, flood.Rcodes["REFUSED"])
	}
}

// wakeUp is a phone or TV waking up: a few hundred names at once
// (docs/design.md#lesson-bursts).
const wakeUp = 300
