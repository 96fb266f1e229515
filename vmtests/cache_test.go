package vmtests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// Scenario (SPEC §8.5 serve-stale): the upstreams answer, then stall. Every
// name the household asked before is answered from the cache, stale with
// EDE 3, before the client's 5 s timeout and by the 1.8 s stale point,
// although no upstream answers anything. The switch to a stalling upstream
// is a SIGHUP reload, so the cache also shows it survives one.
func TestScenarioStaleWhenUpstreamsStall(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	// TTL 1 s, so the warm-up's answers expire within the test.
	l, err := fakeup.ParseListen("dot://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca.CA, CertNames: []string{"upstream.test", "127.0.0.1"}, TTL: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	good := &upstreamNode{srv: srv, url: "tls://" + srv.Listeners()[0].Addr.String(), key: srv.Listeners()[0].Key}
	stalled := startUpstream(t, ca, "dot://127.0.0.1:0?stall=1")
	p := startNxdns(t, ca, settings{attemptMS: 2000, totalMS: 4000}, good)

	names := make([]string, 20)
	for i := range names {
		names[i] = fmt.Sprintf("device%d.stale.test.", i)
		ask(t, p, names[i])
	}
	for _, n := range names {
		testutil.WaitFor(t, n+" to expire in the cache", 10*time.Second, func() bool { return p.cacheState(t, n) == "stale" })
	}

	cfg := strings.Replace(readFile(t, p.cfg), good.url, stalled.url, 1)
	writeFile(t, p.cfg, cfg)
	hangUp(t, p)
	testutil.WaitFor(t, "the reload", 10*time.Second, func() bool { return p.logs.count("reloaded") == 1 })

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
	for r := range results {
		switch {
		case r.err != nil:
			t.Errorf("%s: %v after %v: the client timed out", r.name, r.err, r.took)
		case r.resp.Rcode != dns.RcodeSuccess || len(r.resp.Answer) != 1 || !hasEDE(r.resp, dns.ExtendedErrorCodeStaleAnswer):
			t.Errorf("%s: %v, want the stale answer with EDE 3", r.name, r.resp)
		case r.took > 1800*time.Millisecond+700*time.Millisecond:
			t.Errorf("%s: answered after %v, want by the 1.8 s stale point (plus a margin)", r.name, r.took)
		}
	}
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
