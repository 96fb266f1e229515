package vmtests

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/pathemu"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestClientShapedRefusalsLeaveTheUpstreamsServing is issue 29 item 3
// against the real binary: a LAN client's queries that public upstreams
// refuse (classes NONE, CHAOS, Hesiod, ANY; names under the upstreams'
// policy) used to count as upstream failures, and three of them put every
// upstream in backoff (/api/health 503). Now non-IN classes are refused by
// nxdns itself and never forwarded (kdig -c NONE/CH/CLASS4 sees REFUSED),
// and an IN query both upstreams refuse fails over but leaves health to the
// probe: after a thousand such queries both upstreams still serve.
func TestClientShapedRefusalsLeaveTheUpstreamsServing(t *testing.T) {
	skipShort(t)
	kdig := tool(t, "kdig", "knot-dnsutils")
	ca := newTestCA(t)
	var nonIN atomic.Int64
	answer := func(_ context.Context, q *dns.Msg) *dns.Msg {
		m := new(dns.Msg).SetReply(q)
		switch {
		case q.Question[0].Qclass != dns.ClassINET:
			nonIN.Add(1)
			m.Rcode = dns.RcodeRefused // what a public resolver says to CHAOS
		case strings.HasSuffix(q.Question[0].Name, ".refused.test."):
			m.Rcode = dns.RcodeRefused // the upstream's policy: not its health
		}
		return m // anything else, the probe's `. NS` included: NOERROR
	}
	var ups []*upstreamNode
	for range 2 {
		ups = append(ups, startUpstreamWith(t, ca, "dot://127.0.0.1:0", pathemu.Path{}, func(c *fakeup.Config) {
			c.Listen[0].Hooks = &fakeup.Hooks{Answer: answer}
		}))
	}
	p := startNxdns(t, ca, settings{}, ups...)
	health := func() int {
		resp, err := http.Get("http://" + p.web + "/api/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testutil.WaitFor(t, "/api/health 200 after the start-up probes", 10*time.Second, func() bool { return health() == http.StatusOK })

	host, port, _ := net.SplitHostPort(p.dns)
	for _, args := range [][]string{
		{"-c", "NONE", "example.org.", "A"},
		{"-c", "CH", "version.bind.", "TXT"},
		{"-c", "CH", "id.server.", "TXT"},
		{"-c", "CLASS4", "example.org.", "TXT"}, // Hesiod
		{"-c", "ANY", "example.org.", "A"},
	} {
		out, err := run(t, kdig, append([]string{"@" + host, "-p", port, "+retry=0", "+time=5"}, args...)...)
		if err != nil || !strings.Contains(out, "status: REFUSED") {
			t.Errorf("kdig %v: %v, want REFUSED from nxdns\n%s", args, err, out)
		}
	}

	classes := []uint16{dns.ClassNONE, dns.ClassCHAOS, dns.ClassHESIOD, dns.ClassANY}
	const total, workers = 1000, 20
	var wg sync.WaitGroup
	var unanswered atomic.Int64
	for w := range workers {
		wg.Go(func() {
			c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
			for i := w; i < total; i += workers {
				m := new(dns.Msg)
				if i%2 == 0 {
					m.SetQuestion("x.example.org.", dns.TypeA)
					m.Question[0].Qclass = classes[i/2%len(classes)]
				} else {
					m.SetQuestion("host.refused.test.", dns.TypeA)
				}
				if _, _, err := c.Exchange(m, p.dns); err != nil {
					unanswered.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := unanswered.Load(); n != 0 {
		t.Errorf("%d of %d queries unanswered", n, total)
	}
	if n := nonIN.Load(); n != 0 {
		t.Errorf("the upstreams were asked %d non-IN queries, want none: nxdns answers them", n)
	}
	if code := health(); code != http.StatusOK {
		t.Errorf("/api/health %d after %d refused queries, want 200\nlog:\n%s", code, total, p.logs.String())
	}
	if n := p.logs.count("upstream entering backoff"); n != 0 {
		t.Errorf("%d backoff episodes began, want none\nlog:\n%s", n, p.logs.String())
	}
}
