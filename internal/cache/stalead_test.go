package cache_test

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// A stale answer is past its TTL, which the validator capped at its
// signatures' expiration (RFC 4035 §5.3.3), and its refresh failed — in
// enforce, perhaps because it now validates as bogus: it is served, but no
// longer as validated data, so without AD (docs/dnssec.md).
func TestServeStale_withoutAD(t *testing.T) {
	r := newRig(t, withBudget(500*time.Millisecond))
	validated := func(q *dns.Msg) *dns.Msg {
		m := answerA("192.0.2.7", 60)(q)
		m.AuthenticatedData = true
		return m
	}
	r.up.set(validated)
	ask := func() (*dns.Msg, *query.Event) {
		m := new(dns.Msg).SetQuestion("signed.example.", dns.TypeA)
		m.SetEdns0(1232, true)
		return r.ask(t, m), r.event(t)
	}
	if resp, _ := ask(); !resp.AuthenticatedData {
		t.Fatalf("fresh: %v, want AD", resp)
	}
	r.up.set(nil) // the upstream stalls
	r.clock.AdvanceS(61)
	resp, ev := ask()
	if ev.Source != query.SourceStale {
		t.Fatalf("source %q, want the stale answer", ev.Source)
	}
	if resp.AuthenticatedData {
		t.Errorf("stale answer with AD: %v", resp)
	}
}
