package dnssec

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// An upstream that does not serve the trust anchor's keys makes every
// answer under it bogus; once that is known, a new name costs no lookup
// (docs/dnssec.md "Bounds").
func TestBogusAnchorCostsNoLookups(t *testing.T) {
	w := newWorld(t)
	// NODATA without a proof for every lookup, the root's DNSKEY included:
	// an upstream that ignores DNSSEC (the benchmarks' fake upstream).
	w.override = func(name string, qtype uint16) *dns.Msg { return msg(name, qtype, dns.RcodeSuccess, nil, nil) }
	v := w.validator(t, nil)
	first := check(t, v, msg("m1.miss.example.", dns.TypeA, 0, []dns.RR{rr("m1.miss.example. 300 IN A 192.0.2.1")}, nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing)
	n := w.fetches.Load()
	for _, name := range []string{"m2.miss.example.", "www.other.test."} {
		if r := check(t, v, msg(name, dns.TypeA, 0, []dns.RR{rr(name + " 300 IN A 192.0.2.1")}, nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing); r != first {
			t.Errorf("%s: verdict %v, want the anchor's %v", name, r, first)
		}
	}
	if m := w.fetches.Load(); m != n {
		t.Fatalf("%d lookups under a trust anchor known bogus, want none", m-n)
	}
}

// A DS lookup the upstream answers SERVFAIL is remembered for refusedTTL:
// the zone's next names cost no lookup until then, and after it the zone
// is asked again. A lookup that got no answer is not remembered.
func TestFailedLookupsAreRememberedOnlyWhenAnswered(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	var unanswered atomic.Bool
	v := w.validator(t, func(c *Config) {
		c.Now = func() time.Time { return time.Unix(0, now.Load()) }
		c.Fetch = func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
			if name == "a.test." && qtype == dns.TypeDS {
				w.fetches.Add(1)
				if unanswered.Load() {
					return nil, errors.New("i/o timeout")
				}
				return msg(name, qtype, dns.RcodeServerFailure, nil, nil), nil
			}
			return w.fetch(ctx, name, qtype)
		}
	})
	ask := func(label string) {
		t.Helper()
		name := label + ".a.test."
		check(t, v, msg(name, dns.TypeA, 0, z.sign(rr(name+" 300 IN A 192.0.2.1")), nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing)
	}
	ask("www")
	n := w.fetches.Load()
	ask("x")
	if m := w.fetches.Load(); m != n {
		t.Fatalf("%d lookups within %v of a SERVFAIL for the zone's DS, want none", m-n, refusedTTL)
	}
	now.Add(int64(refusedTTL + time.Second))
	ask("y")
	if m := w.fetches.Load(); m == n {
		t.Fatalf("no lookup %v after the SERVFAIL: the failure was kept too long", refusedTTL+time.Second)
	}
	unanswered.Store(true)
	now.Add(int64(refusedTTL + time.Second))
	ask("z1")
	n = w.fetches.Load()
	ask("z2")
	if m := w.fetches.Load(); m == n {
		t.Fatal("a lookup that got no answer was remembered")
	}
}
