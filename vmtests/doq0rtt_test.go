package vmtests

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// Issue 37's idle-close scenario over QUIC: one upstream 30 ms of emulated
// path away that answers at once and closes a connection idle for 300 ms.
// The first query after the close redials. Over DoQ with a session ticket
// that allows early data, the query goes with the first flight (0-RTT, RFC
// 9250 §4.5) and costs about one round trip, as a warm query does; over DoQ
// whose tickets allow no early data it waits for the QUIC handshake, two
// round trips; over DoT a TCP connect and a TLS handshake come first, three.
// Shapes, not times: the 0-RTT redial is closer to one warm query than to
// two, and below the other two redials in the same run (docs/performance.md
// "DoQ 0-RTT after an idle close").
func TestScenarioDoQ0RTTAfterIdleClose(t *testing.T) {
	skipShort(t)
	const idleClose = 300 * time.Millisecond
	ratio := map[string]float64{}
	for _, tr := range []struct{ name, listen string }{
		{"DoQ 0-RTT", "doq://127.0.0.1:0?early_data=1&idle_close=" + idleClose.String()},
		{"DoQ", "doq://127.0.0.1:0?idle_close=" + idleClose.String()},
		{"DoT", "dot://127.0.0.1:0?idle_close=" + idleClose.String()},
	} {
		ca := newTestCA(t)
		path := scenarioPath
		path.RTT = 30 * time.Millisecond
		up := startUpstreamOn(t, ca, tr.listen, path)
		p := startNxdns(t, ca, settings{}, up)
		testutil.WaitFor(t, "the start-up probe's answer", 10*time.Second, func() bool { return up.counts().Answered >= 1 })

		// Warm: queries back to back on the open connection (each well
		// inside idle_close); the median is one round trip plus nxdns.
		var warm []time.Duration
		for i := range 7 {
			warm = append(warm, timedQuery(t, p, fmt.Sprintf("warm%d.example.", i)))
		}
		slices.Sort(warm)
		w := warm[len(warm)/2]

		// Cold: time passing is the scenario (the upstream closes the idle
		// connection); the handshake count proves each query redialed.
		// Best of three: two shared cores add noise to single runs.
		var best time.Duration
		for i := range 3 {
			time.Sleep(3 * idleClose)
			before := up.counts().Handshakes
			d := timedQuery(t, p, fmt.Sprintf("cold%d.example.", i))
			testutil.WaitFor(t, "the redial's handshake", 5*time.Second, func() bool { return up.counts().Handshakes > before })
			if best == 0 || d < best {
				best = d
			}
			t.Logf("%s: query after idle close %.1f ms", tr.name, ms(d))
		}
		ratio[tr.name] = float64(best) / float64(w)
		m := p.metrics(t)
		accepted := metric(m, "nxdns_upstream_zero_rtt_total", "outcome", "accepted")
		t.Logf("%s: warm query %.1f ms, best after idle close %.1f ms (%.2f × warm); 0-RTT accepted %v, rejected %v",
			tr.name, ms(w), ms(best), ratio[tr.name], accepted, metric(m, "nxdns_upstream_zero_rtt_total", "outcome", "rejected"))
		if early := tr.name == "DoQ 0-RTT"; early && accepted < 3 || !early && accepted != 0 {
			t.Errorf("%s: %v dials with 0-RTT accepted; want one per idle close with early data, none without", tr.name, accepted)
		}
	}
	t.Logf("first query after an idle close, × a warm query: DoQ with 0-RTT %.2f, DoQ without %.2f, DoT %.2f",
		ratio["DoQ 0-RTT"], ratio["DoQ"], ratio["DoT"])
	// One round trip is 1×, two are about 2×: closer to one than to two.
	if r := ratio["DoQ 0-RTT"]; r <= 0 || r >= 1.5 {
		t.Errorf("DoQ with 0-RTT: the query after an idle close costs %.2f × a warm query, want < 1.5 (about one round trip)", r)
	}
	// The comparison is only worth its name if a redial without 0-RTT
	// does cost its round trips in this run.
	if ratio["DoQ"] < 1.5 || ratio["DoT"] < 1.5 {
		t.Errorf("redials without 0-RTT cost DoQ %.2f ×, DoT %.2f × a warm query; want each ≥ 1.5 (a handshake's round trip)", ratio["DoQ"], ratio["DoT"])
	}
}

// timedQuery asks nxdns for name over UDP and returns how long the answer
// took; anything but one A record fails the test.
func timedQuery(t *testing.T, p *nxdnsProc, name string) time.Duration {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	r, d, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), p.dns)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		t.Fatalf("%s: %s with %d answers, want NOERROR with an answer", name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
