package vmtests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// Scenario (docs/design.md#serve-stale): the upstream answers, then stalls in
// place, over the emulated path, on the connection the pool already holds.
// Every name the household asked before is answered from the cache, stale
// with EDE 3, before the client's 5 s timeout and by the 1.8 s stale point,
// although no upstream answers anything. A SIGHUP reload comes between the
// warm-up and the stall, so the cache also shows it survives one.
func TestScenarioStaleWhenUpstreamsStall(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	var stalled atomic.Bool
	answer := func(_ context.Context, q *dns.Msg) *dns.Msg {
		if stalled.Load() {
			return nil // no answer: the query stalls
		}
		m := new(dns.Msg).SetReply(q)
		name := q.Question[0].Name
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
			A: fakeup.AddressV4(name).AsSlice()}} // TTL 1 s: the warm-up's answers expire within the test
		return m
	}
	up := startUpstreamWith(t, ca, "dot://127.0.0.1:0", scenarioPath, func(c *fakeup.Config) {
		c.Listen[0].Hooks = &fakeup.Hooks{Answer: answer}
	})
	p := startNxdns(t, ca, settings{attemptMS: 2000, totalMS: 4000}, up)

	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("device%d.stale.test.", i)
		ask(t, p, names[i])
	}
	hangUp(t, p)
	testutil.WaitFor(t, "the reload", 10*time.Second, func() bool { return p.logs.count("reloaded") == 1 })
	for _, n := range names {
		testutil.WaitFor(t, n+" to expire in the cache", 10*time.Second, func() bool { return p.cacheState(t, n) == "stale" })
	}
	stalled.Store(true)

	type result struct {
		name string
		resp *dns.Msg
		took time.Duration
		err  error
	}
	results := make(chan result, len(names))
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Go(func() {
			m := new(dns.Msg).SetQuestion(n, dns.TypeA)
			m.SetEdns0(1232, false)
			c := &dns.Client{Net: "udp", Timeout: 5 * time.Second} // glibc's first-try timeout
			start := time.Now()
			resp, _, err := c.Exchange(m, p.dns)
			results <- result{n, resp, time.Since(start), err}
		})
	}
	wg.Wait()
	close(results)
	var slowest time.Duration
	for r := range results {
		slowest = max(slowest, r.took)
		switch {
		case r.err != nil:
			t.Errorf("%s: %v after %v: the client timed out", r.name, r.err, r.took)
		case r.resp.Rcode != dns.RcodeSuccess || len(r.resp.Answer) != 1 || !hasEDE(r.resp, dns.ExtendedErrorCodeStaleAnswer):
			t.Errorf("%s: %v, want the stale answer with EDE 3", r.name, r.resp)
		case r.took > 1800*time.Millisecond+700*time.Millisecond:
			t.Errorf("%s: answered after %v, want by the 1.8 s stale point (plus a margin)", r.name, r.took)
		}
	}
	t.Logf("stale while the upstream stalls: %d names answered, the slowest in %v", len(names), slowest.Round(time.Millisecond))
	if got := metric(p.metrics(t), "nxdns_cache_stale_answers_total"); got != float64(len(names)) {
		t.Errorf("nxdns_cache_stale_answers_total = %v, want %d", got, len(names))
	}
}

func hasEDE(m *dns.Msg, code uint16) bool {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok && e.InfoCode == code {
				return true
			}
		}
	}
	return false
}

// cacheState is the state GET /api/cache/entry reports for name's A entry
// ("fresh", "stale", "expired"), or "" when there is none.
func (p *nxdnsProc) cacheState(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get("http://" + p.web + "/api/cache/entry?type=A&name=" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Entries []struct{ State string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Entries) == 0 {
		return ""
	}
	return out.Entries[0].State
}
