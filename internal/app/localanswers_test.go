package app

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestLocal_privateNamesNeverReachTheUpstream: what a new user tried (a
// private reverse lookup, a bare name, the special names) is answered by
// nxdns itself; the fake upstream's query counter moves only for the one
// public name asked around them.
func TestLocal_privateNamesNeverReachTheUpstream(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, true)
	cfg.Local.Records = []string{"nas.home. A 192.168.1.50"}
	a := r.start(t, cfg)
	probed(t, a)
	before := r.dot.Counters().Queries

	for _, q := range []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"3.2.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"50.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess},
		{"nas.", dns.TypeA, dns.RcodeSuccess}, // NODATA: docs/local.md
		{"nas.home.", dns.TypeA, dns.RcodeSuccess},
		{"nas.home.", dns.TypeTXT, dns.RcodeSuccess},
		{"printer.local.", dns.TypeA, dns.RcodeNameError},
		{"x.home.arpa.", dns.TypeA, dns.RcodeNameError},
		{"localhost.", dns.TypeA, dns.RcodeSuccess},
		{"x.invalid.", dns.TypeA, dns.RcodeNameError},
		{"use-application-dns.net.", dns.TypeA, dns.RcodeNameError},
		{"_dns.resolver.arpa.", dns.TypeSVCB, dns.RcodeSuccess},
		{mustReverse(t, "fd00::1"), dns.TypePTR, dns.RcodeNameError},
	} {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(q.name, q.qtype), addr)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		if resp.Rcode != q.rcode || !resp.Authoritative {
			t.Errorf("%s %s: rcode %s AA %v, want %s from nxdns itself", q.name, dns.TypeToString[q.qtype],
				dns.RcodeToString[resp.Rcode], resp.Authoritative, dns.RcodeToString[q.rcode])
		}
	}
	ask(t, addr, "after.example.")
	if got := r.dot.Counters().Queries - before; got != 1 {
		t.Errorf("the upstream saw %d queries, want 1 (only after.example.)", got)
	}
	// The LAN zone's names still go to the LAN resolver, not answered here.
	lanBefore := r.lan.Counters().Queries
	ask(t, addr, "printer.lan.")
	if r.lan.Counters().Queries != lanBefore+1 {
		t.Error("a forward zone's name did not reach its resolver")
	}
}

// TestLocal_forwardPrivateSendsThemOn: the switch for networks that route
// those names.
func TestLocal_forwardPrivateSendsThemOn(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.Local.ForwardPrivate = true
	a := r.start(t, cfg)
	probed(t, a)
	before := r.dot.Counters().Queries
	ask(t, addr, "nas.")
	if got := r.dot.Counters().Queries - before; got != 1 {
		t.Errorf("the upstream saw %d queries, want 1", got)
	}
}

// probed waits for the pool's start-up probe, so the upstream's counter
// moves afterwards only for the test's own queries.
func probed(t *testing.T, a *App) {
	t.Helper()
	testutil.WaitFor(t, "the start-up probe", 5*time.Second, func() bool {
		u := a.gen.Load().pool.Snapshot().Upstreams[0]
		return u.ProbeSuccesses+u.ProbeFailures > 0
	})
}

func mustReverse(t *testing.T, ip string) string {
	t.Helper()
	r, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
