package dnssec

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A signed answer from each supported algorithm is secure; the chain runs
// from the test root's anchor through test. to the zone.
func TestSecureAnswerForEverySupportedAlgorithm(t *testing.T) {
	for _, alg := range []uint8{dns.RSASHA256, dns.RSASHA512, dns.ECDSAP256SHA256, dns.ECDSAP384SHA384, dns.ED25519} {
		t.Run(dns.AlgorithmToString[alg], func(t *testing.T) {
			w := newWorld(t)
			w.add("test.", dns.ECDSAP256SHA256, true)
			z := w.add("a.test.", alg, true)
			v := w.validator(t, nil)
			check(t, v, msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil), Secure, 0)
		})
	}
}

// RFC 6840 §5.2: a zone whose DS set names only algorithms or digests the
// validator does not implement is insecure, not bogus.
func TestUnsupportedAlgorithmOrDigestIsInsecure(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	old := w.add("old.test.", dns.RSASHA1, true)
	odd := w.add("odd.test.", dns.ED25519, true)
	test := w.zones["test."]
	w.override = func(name string, qtype uint16) *dns.Msg {
		if name == "odd.test." && qtype == dns.TypeDS {
			ds := odd.ds()
			ds.DigestType = 99
			return msg(name, qtype, 0, test.sign(ds), nil)
		}
		return nil
	}
	v := w.validator(t, nil)
	check(t, v, msg("www.old.test.", dns.TypeA, 0, old.sign(rr("www.old.test. 300 IN A 192.0.2.1")), nil), Insecure, 0)
	check(t, v, msg("www.odd.test.", dns.TypeA, 0, odd.sign(rr("www.odd.test. 300 IN A 192.0.2.1")), nil), Insecure, 0)
}

func TestBogusAnswers(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	now := time.Now()
	a := rr("www.a.test. 300 IN A 192.0.2.1")
	tampered := z.sign(a)
	tampered[0] = rr("www.a.test. 300 IN A 192.0.2.66")
	rogue := &tzone{name: "a.test."}
	rogue.key, rogue.priv = genKey(t, "a.test.", dns.ED25519, 257)
	cases := []struct {
		name string
		ans  []dns.RR
		ede  uint16
	}{
		{"tampered data", tampered, dns.ExtendedErrorCodeDNSBogus},
		{"expired", z.signAt(now.Add(-48*time.Hour), now.Add(-24*time.Hour), a), dns.ExtendedErrorCodeSignatureExpired},
		{"not yet valid", z.signAt(now.Add(24*time.Hour), now.Add(48*time.Hour), a), dns.ExtendedErrorCodeSignatureNotYetValid},
		{"RRSIG stripped", []dns.RR{a}, dns.ExtendedErrorCodeRRSIGsMissing},
		{"signed by a key not in the DNSKEY set", rogue.sign(a), dns.ExtendedErrorCodeDNSKEYMissing},
		{"signed by another zone", w.add("b.test.", dns.ED25519, true).sign(a), dns.ExtendedErrorCodeRRSIGsMissing},
	}
	v := w.validator(t, nil)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			check(t, v, msg("www.a.test.", dns.TypeA, 0, c.ans, nil), Bogus, c.ede)
		})
	}
}

// Signatures just outside their validity period pass within the skew the
// operator allows, and not beyond it.
func TestClockSkewAllowance(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	now := time.Now()
	m := msg("www.a.test.", dns.TypeA, 0, z.signAt(now.Add(-time.Hour), now.Add(-2*time.Minute), rr("www.a.test. 300 IN A 192.0.2.1")), nil)
	check(t, w.validator(t, func(c *Config) { c.Skew = 5 * time.Minute }), m, Secure, 0)
	check(t, w.validator(t, func(c *Config) { c.Skew = time.Minute }), m, Bogus, dns.ExtendedErrorCodeSignatureExpired)
}

// A DS that matches no key of the child is DNSKEY Missing (EDE 9).
func TestDSMatchingNoKeyIsBogus(t *testing.T) {
	w := newWorld(t)
	test := w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	other, _ := genKey(t, "a.test.", dns.ED25519, 257)
	w.override = func(name string, qtype uint16) *dns.Msg {
		if name == "a.test." && qtype == dns.TypeDS {
			return msg(name, qtype, 0, test.sign(other.ToDS(dns.SHA256)), nil)
		}
		return nil
	}
	check(t, w.validator(t, nil), msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing)
}

// An unsigned delegation proven by a signed NSEC without DS is insecure;
// the same delegation with the proof's RRSIGs stripped is bogus.
func TestInsecureDelegation(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	w.add("plain.test.", 0, false)
	ans := msg("www.plain.test.", dns.TypeA, 0, []dns.RR{rr("www.plain.test. 300 IN A 192.0.2.1")}, nil)
	r := check(t, w.validator(t, nil), ans, Insecure, 0)
	if r.Zone != "plain.test." {
		t.Errorf("zone %q, want plain.test.", r.Zone)
	}
	test := w.zones["test."]
	w.override = func(name string, qtype uint16) *dns.Msg {
		if name == "plain.test." && qtype == dns.TypeDS { // the upstream stripped the RRSIGs
			return msg(name, qtype, 0, nil, []dns.RR{test.soa(), nsec("plain.test.", "\\000.plain.test.", dns.TypeNS)})
		}
		return nil
	}
	check(t, w.validator(t, nil), ans, Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
}

// An NSEC3 opt-out span covering the delegation proves it insecure.
func TestNSEC3OptOutDelegationIsInsecure(t *testing.T) {
	w := newWorld(t)
	test := w.add("test.", dns.ECDSAP256SHA256, true)
	w.add("plain.test.", 0, false)
	h := nsec3Hash("test.", 0)
	w.override = func(name string, qtype uint16) *dns.Msg {
		if name == "plain.test." && qtype == dns.TypeDS {
			// One record matching the apex and covering everything else.
			n := nsec3("test.", h, h, 0, true, dns.TypeSOA, dns.TypeNS)
			return msg(name, qtype, 0, nil, append(test.sign(test.soa()), test.sign(n)...))
		}
		return nil
	}
	check(t, w.validator(t, nil), msg("www.plain.test.", dns.TypeA, 0, []dns.RR{rr("www.plain.test. 300 IN A 192.0.2.1")}, nil), Insecure, 0)
}

func TestNSECDenials(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	soa := z.sign(z.soa())
	v := w.validator(t, nil)
	with := func(rrs ...dns.RR) []dns.RR { return append(append([]dns.RR{}, soa...), rrs...) }
	t.Run("NXDOMAIN", func(t *testing.T) {
		// n < nope < o, and the apex NSEC covers *.a.test.
		ns := with(append(z.sign(nsec("n.a.test.", "o.a.test.", dns.TypeA)), z.sign(nsec("a.test.", "b.a.test.", dns.TypeSOA))...)...)
		check(t, v, msg("nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, ns), Secure, 0)
	})
	t.Run("NXDOMAIN without the wildcard proof", func(t *testing.T) {
		ns := with(z.sign(nsec("n.a.test.", "o.a.test.", dns.TypeA))...)
		check(t, v, msg("nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, ns), Bogus, dns.ExtendedErrorCodeNSECMissing)
	})
	t.Run("NODATA", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeAAAA, 0, nil, with(z.sign(nsec("www.a.test.", "x.a.test.", dns.TypeA))...)), Secure, 0)
	})
	t.Run("NODATA whose NSEC lists the type", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeA, 0, nil, with(z.sign(nsec("www.a.test.", "x.a.test.", dns.TypeA))...)), Bogus, dns.ExtendedErrorCodeNSECMissing)
	})
	t.Run("NODATA at an empty non-terminal", func(t *testing.T) {
		check(t, v, msg("ent.a.test.", dns.TypeA, 0, nil, with(z.sign(nsec("b.a.test.", "x.ent.a.test.", dns.TypeA))...)), Secure, 0)
	})
	t.Run("NODATA without NSEC", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeAAAA, 0, nil, soa), Bogus, dns.ExtendedErrorCodeNSECMissing)
	})
	t.Run("NODATA with the NSEC's RRSIG stripped", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeAAAA, 0, nil, with(nsec("www.a.test.", "x.a.test.", dns.TypeA))), Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
	})
	t.Run("NODATA with everything stripped", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeAAAA, 0, nil, []dns.RR{z.soa()}), Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
	})
	t.Run("wildcard NODATA", func(t *testing.T) {
		ns := with(append(z.sign(nsec("b.a.test.", "c.a.test.", dns.TypeA)), z.sign(nsec("*.a.test.", "b.a.test.", dns.TypeA))...)...)
		check(t, v, msg("bz.a.test.", dns.TypeTXT, 0, nil, ns), Secure, 0)
	})
}

func TestNSEC3Denials(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	soa := z.sign(z.soa())
	hash := func(n string) string { return nsec3Hash(n, 0) }
	// A record matching the apex whose span wraps to cover every other hash:
	// the only existing names are the apex and www.
	apex, www := hash("a.test."), hash("www.a.test.")
	span := func(iter uint16, optout bool) []dns.RR {
		lo, hi := apex, www
		if hi < lo {
			lo, hi = hi, lo
		}
		// Two records: lo→hi and hi→lo (wrapping); each matches one name.
		types := func(h string) []uint16 {
			if h == apex {
				return []uint16{dns.TypeSOA, dns.TypeNS, dns.TypeDNSKEY}
			}
			return []uint16{dns.TypeA}
		}
		a := nsec3("a.test.", lo, hi, iter, optout, types(lo)...)
		b := nsec3("a.test.", hi, lo, iter, optout, types(hi)...)
		if iter != 0 { // the hashes no longer match the names, but the parameters are what count
			return append(append([]dns.RR{}, soa...), append(z.sign(a), z.sign(b)...)...)
		}
		return append(append([]dns.RR{}, soa...), append(z.sign(a), z.sign(b)...)...)
	}
	v := w.validator(t, nil)
	t.Run("NXDOMAIN", func(t *testing.T) {
		check(t, v, msg("nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, span(0, false)), Secure, 0)
	})
	t.Run("NXDOMAIN under opt-out", func(t *testing.T) {
		check(t, v, msg("nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, span(0, true)), Insecure, 0)
	})
	t.Run("NODATA", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeAAAA, 0, nil, span(0, false)), Secure, 0)
	})
	t.Run("NODATA that lists the type", func(t *testing.T) {
		check(t, v, msg("www.a.test.", dns.TypeA, 0, nil, span(0, false)), Bogus, dns.ExtendedErrorCodeNSECMissing)
	})
	t.Run("151 iterations are insecure", func(t *testing.T) {
		check(t, v, msg("nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, span(151, false)), Insecure, 0)
	})
	t.Run("10000 iterations hash nothing", func(t *testing.T) {
		r, sigs, hashes := v.ValidateCounted(context.Background(), msg("nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, span(10000, false)))
		if r.Status != Insecure || !strings.Contains(r.Reason, "RFC 9276") || hashes != 0 {
			t.Fatalf("verdict %v after %d hashes, want insecure (RFC 9276) after none", r, hashes)
		}
		t.Logf("NSEC3 with 10000 iterations: %v, %d signature checks, %d hashes", r, sigs, hashes)
	})
}

// A wildcard expansion is secure only with the proof that the name itself
// does not exist.
func TestWildcardExpansion(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	// Signed as *.a.test. (Labels 2), served as x.a.test.
	signed := z.sign(rr("*.a.test. 300 IN A 192.0.2.9"))
	ans := []dns.RR{rr("x.a.test. 300 IN A 192.0.2.9"), signed[1]}
	ans[1].Header().Name = "x.a.test."
	v := w.validator(t, nil)
	check(t, v, msg("x.a.test.", dns.TypeA, 0, ans, z.sign(nsec("b.a.test.", "y.a.test.", dns.TypeA))), Secure, 0)
	check(t, v, msg("x.a.test.", dns.TypeA, 0, ans, nil), Bogus, dns.ExtendedErrorCodeNSECMissing)
	// NSEC3: the next closer name x.a.test. covered.
	h := nsec3Hash("x.a.test.", 0)
	lo, hi := "00000000000000000000000000000000", "VVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVV"
	if h == lo || h == hi {
		t.Skip("hash at the edge")
	}
	check(t, v, msg("x.a.test.", dns.TypeA, 0, ans, z.sign(nsec3("a.test.", lo, hi, 0, false, dns.TypeA))), Secure, 0)
	// Labels larger than the owner's: the signature is never used.
	absurd := z.sign(rr("www.a.test. 300 IN A 192.0.2.1"))
	absurd[1].(*dns.RRSIG).Labels = 200
	check(t, v, msg("www.a.test.", dns.TypeA, 0, absurd, nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing)
}

// CNAME chains cross zones: each link is validated in its own zone, and
// the answer is as good as its weakest link.
func TestCNAMEChainAcrossZones(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	a := w.add("a.test.", dns.ED25519, true)
	b := w.add("b.test.", dns.ECDSAP256SHA256, true)
	w.add("plain.test.", 0, false)
	cname := a.sign(rr("www.a.test. 300 IN CNAME www.b.test."))
	v := w.validator(t, nil)
	check(t, v, msg("www.a.test.", dns.TypeA, 0, append(cname, b.sign(rr("www.b.test. 300 IN A 192.0.2.2"))...), nil), Secure, 0)
	toPlain := a.sign(rr("www.a.test. 300 IN CNAME www.plain.test."))
	check(t, v, msg("www.a.test.", dns.TypeA, 0, append(toPlain, rr("www.plain.test. 300 IN A 192.0.2.3")), nil), Insecure, 0)
	check(t, v, msg("www.a.test.", dns.TypeA, 0, append(cname, rr("www.b.test. 300 IN A 192.0.2.2")), nil), Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
	// The chain ends in a NODATA proven in the target's zone.
	ns := append(b.sign(b.soa()), b.sign(nsec("www.b.test.", "x.b.test.", dns.TypeCNAME+100))...)
	check(t, v, msg("www.a.test.", dns.TypeA, 0, cname, ns), Secure, 0)
	check(t, v, msg("www.a.test.", dns.TypeA, 0, cname, nil), Bogus, dns.ExtendedErrorCodeNSECMissing)
}

// A DNAME's synthesised CNAME is unsigned and checked against the DNAME.
func TestDNAMESynthesis(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	a := w.add("a.test.", dns.ED25519, true)
	b := w.add("b.test.", dns.ED25519, true)
	ans := append(a.sign(rr("d.a.test. 300 IN DNAME b.test.")), rr("www.d.a.test. 300 IN CNAME www.b.test."))
	ans = append(ans, b.sign(rr("www.b.test. 300 IN A 192.0.2.4"))...)
	v := w.validator(t, nil)
	check(t, v, msg("www.d.a.test.", dns.TypeA, 0, ans, nil), Secure, 0)
	forged := append(a.sign(rr("d.a.test. 300 IN DNAME b.test.")), rr("www.d.a.test. 300 IN CNAME evil.b.test."))
	check(t, v, msg("www.d.a.test.", dns.TypeA, 0, forged, nil), Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
}

// RFC 7646: a negative trust anchor makes its names insecure, bogus or not,
// and can be set while the validator runs.
func TestNegativeTrustAnchor(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	bad := msg("www.a.test.", dns.TypeA, 0, []dns.RR{rr("www.a.test. 300 IN A 192.0.2.1")}, nil)
	v := w.validator(t, nil)
	check(t, v, bad, Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
	v.SetNTAs([]string{"A.test"})
	check(t, v, bad, Insecure, 0)
	// Reached through a CNAME from a secure zone, too.
	b := w.add("b.test.", dns.ED25519, true)
	chain := append(b.sign(rr("x.b.test. 300 IN CNAME www.a.test.")), z.signAt(time.Now().Add(-3*time.Hour), time.Now().Add(-2*time.Hour), rr("www.a.test. 300 IN A 192.0.2.1"))...)
	check(t, v, msg("x.b.test.", dns.TypeA, 0, chain, nil), Insecure, 0)
	v.SetNTAs(nil)
	check(t, v, msg("x.b.test.", dns.TypeA, 0, chain, nil), Bogus, dns.ExtendedErrorCodeSignatureExpired)
}

// A DS answer signed by the zone itself, or by a zone below it, could make
// a naive validator chase keys in a circle: it is bogus, after a bounded
// number of fetches.
func TestDSLoopIsBogus(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	child := w.add("sub.a.test.", dns.ED25519, true)
	w.override = func(name string, qtype uint16) *dns.Msg {
		switch {
		case name == "a.test." && qtype == dns.TypeDS:
			return msg(name, qtype, 0, z.sign(z.ds()), nil) // signed by itself
		case name == "sub.a.test." && qtype == dns.TypeDS:
			return msg(name, qtype, 0, child.sign(child.ds()), nil)
		}
		return nil
	}
	v := w.validator(t, nil)
	check(t, v, msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil), Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
	check(t, v, msg("www.sub.a.test.", dns.TypeA, 0, child.sign(rr("www.sub.a.test. 300 IN A 192.0.2.1")), nil), Bogus, dns.ExtendedErrorCodeRRSIGsMissing)
	if n := w.fetches.Load(); n > MaxFetches {
		t.Errorf("%d fetches, more than the bound %d", n, MaxFetches)
	}
}

// KeyTrap (CVE-2023-50387): a DNSKEY set of 500 keys and an RRset with a
// hundred RRSIGs that each name one of them, none valid. The validator
// stops at the bound and says bogus.
func TestKeyTrapIsBounded(t *testing.T) {
	w, m := keyTrap(t, dns.ED25519)
	v := w.validator(t, nil)
	r, sigs, _ := v.ValidateCounted(context.Background(), m)
	if r.Status != Bogus || sigs > MaxVerifications {
		t.Fatalf("verdict %v after %d signature checks, want bogus within %d", r, sigs, MaxVerifications)
	}
	t.Logf("KeyTrap answer: %v after %d signature checks (bound %d per query, %d per RRset)", r, sigs, MaxVerifications, MaxKeyTries)
	// With the chain's keys validated already, the trap RRset alone: the
	// per-RRset bound.
	if r, sigs, _ = v.ValidateCounted(context.Background(), m); r.Status != Bogus || sigs > MaxKeyTries {
		t.Fatalf("warm: verdict %v after %d signature checks, want bogus within %d", r, sigs, MaxKeyTries)
	}
}

// keyTrap is a world whose trap.test. has a DNSKEY set of 500 keys of alg,
// and an answer whose RRset carries a hundred RRSIGs, each naming one of
// them by key tag, none valid.
func keyTrap(tb testing.TB, alg uint8) (*world, *dns.Msg) {
	w := newWorld(tb)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("trap.test.", alg, true)
	keys := []dns.RR{z.key}
	for range 499 {
		k, _ := genKey(tb, "trap.test.", alg, 256)
		keys = append(keys, k)
	}
	w.override = func(name string, qtype uint16) *dns.Msg {
		if name == "trap.test." && qtype == dns.TypeDNSKEY {
			return msg(name, qtype, 0, z.sign(keys...), nil)
		}
		return nil
	}
	a := rr("www.trap.test. 300 IN A 192.0.2.1")
	ans := []dns.RR{a}
	good := z.sign(a)[1].(*dns.RRSIG)
	for i := range 100 {
		bad := *good
		bad.KeyTag = keys[1+i].(*dns.DNSKEY).KeyTag()
		ans = append(ans, &bad)
	}
	return w, msg("www.trap.test.", dns.TypeA, 0, ans, nil)
}

// A fetch that never answers ends with the query's context: the verdict
// comes by the deadline, and the failure is not cached.
func TestFetchHonoursTheDeadline(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	var stall atomic.Bool
	stall.Store(true)
	v := w.validator(t, func(c *Config) {
		c.Fetch = func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
			if stall.Load() {
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return w.fetch(ctx, name, qtype)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	m := msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil)
	if r := v.Validate(ctx, m); r.Status != Bogus || r.EDE != dns.ExtendedErrorCodeDNSKEYMissing {
		t.Fatalf("verdict %v, want bogus (DNSKEY missing)", r)
	}
	stall.Store(false)
	check(t, v, m, Secure, 0)
}

// Validated keys are kept: a second answer from the same zone fetches
// nothing.
func TestKeysAreCached(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	v := w.validator(t, nil)
	check(t, v, msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil), Secure, 0)
	n := w.fetches.Load()
	check(t, v, msg("x.a.test.", dns.TypeA, 0, z.sign(rr("x.a.test. 300 IN A 192.0.2.1")), nil), Secure, 0)
	if m := w.fetches.Load(); m != n {
		t.Fatalf("%d more fetches for a zone already validated", m-n)
	}
}

// Nothing to validate, or no anchor above the name: indeterminate.
func TestIndeterminate(t *testing.T) {
	w := newWorld(t)
	v := w.validator(t, nil)
	check(t, v, msg("x.", dns.TypeA, dns.RcodeServerFailure, nil, nil), Indeterminate, 0)
	test := w.add("test.", dns.ECDSAP256SHA256, true)
	v2 := w.validator(t, func(c *Config) { c.Anchors = []dns.RR{test.key} }) // a DNSKEY anchor for test. only
	check(t, v2, msg("www.example.", dns.TypeA, 0, []dns.RR{rr("www.example. 300 IN A 192.0.2.1")}, nil), Indeterminate, 0)
	check(t, v2, msg("test.", dns.TypeSOA, 0, test.sign(test.soa()), nil), Secure, 0)
}

func TestRootAnchors(t *testing.T) {
	got := RootAnchors()
	if len(got) != 2 || got[0].(*dns.DS).KeyTag != 20326 || got[1].(*dns.DS).KeyTag != 38696 {
		t.Fatalf("root anchors %v, want KSK-2017 (20326) and KSK-2024 (38696)", got)
	}
}

func TestCanonicalOrder(t *testing.T) {
	in := []string{"example.", "a.example.", "yljkjljk.a.example.", "Z.a.example.", "zABC.a.EXAMPLE.", "z.example.", "\\001.z.example.", "*.z.example.", "\\200.z.example."}
	for i := 1; i < len(in); i++ {
		if compareNames(in[i-1], in[i]) >= 0 {
			t.Errorf("%s should sort before %s", in[i-1], in[i])
		}
	}
}

// Below a delegation proven unsigned, a new name costs no lookup: the
// chain of trust cannot resume there.
func TestInsecureIsInheritedWithoutLookups(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	w.add("plain.test.", 0, false)
	v := w.validator(t, nil)
	check(t, v, msg("www.plain.test.", dns.TypeA, 0, []dns.RR{rr("www.plain.test. 300 IN A 192.0.2.1")}, nil), Insecure, 0)
	n := w.fetches.Load()
	check(t, v, msg("a.b.other.plain.test.", dns.TypeA, 0, []dns.RR{rr("a.b.other.plain.test. 300 IN A 192.0.2.1")}, nil), Insecure, 0)
	if m := w.fetches.Load(); m != n {
		t.Fatalf("%d lookups for a name below a known unsigned delegation, want none", m-n)
	}
}

// The parent's NSEC at a delegation covers the names below it in canonical
// order, but proves nothing about them (RFC 6840 §4.1): replayed as the
// denial of a name in the child zone, it is no proof.
func TestParentNSECAtADelegationProvesNothingBelowIt(t *testing.T) {
	w := newWorld(t)
	test := w.add("test.", dns.ECDSAP256SHA256, true)
	w.add("a.test.", dns.ED25519, true)
	ns := append(test.sign(test.soa()), test.sign(nsec("a.test.", "b.test.", dns.TypeNS, dns.TypeDS, dns.TypeRRSIG, dns.TypeNSEC))...)
	check(t, w.validator(t, nil), msg("www.a.test.", dns.TypeA, dns.RcodeNameError, nil, ns), Bogus, dns.ExtendedErrorCodeNSECMissing)
}

// Two queries need the same zone's keys at once: they share one fetch, and
// the one with the shorter deadline does not wait past it for the other's.
func TestSharedFetchNeverOutlastsTheDeadline(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	v := w.validator(t, func(c *Config) {
		c.Fetch = func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
			if name == "a.test." && qtype == dns.TypeDNSKEY {
				started <- struct{}{}
				<-release // a slow upstream, whatever the asking query's deadline
			}
			return w.fetch(ctx, name, qtype)
		}
	})
	m := msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil)
	first := make(chan Result, 1)
	go func() { first <- v.Validate(context.Background(), m) }()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if r := v.Validate(ctx, m); r.Status != Bogus || r.EDE != dns.ExtendedErrorCodeDNSKEYMissing {
		t.Fatalf("the short query: %v, want bogus (DNSKEY missing) at its deadline", r)
	}
	close(release)
	if r := <-first; r.Status != Secure {
		t.Fatalf("the long query: %v, want secure", r)
	}
}

// The parent's NSEC at a delegation (NS without SOA) says which types the
// parent holds there, not the child's: replayed as a NODATA for another
// type at the delegation's own name, it proves nothing (RFC 6840 §4.1,
// RFC 5155 §8.9).
func TestParentNSECAtADelegationProvesNoDataOnlyForDS(t *testing.T) {
	w := newWorld(t)
	test := w.add("test.", dns.ECDSAP256SHA256, true)
	w.add("a.test.", dns.ED25519, true)
	v := w.validator(t, nil)
	delegation := nsec("a.test.", "b.test.", dns.TypeNS, dns.TypeDS, dns.TypeRRSIG, dns.TypeNSEC)
	ns := append(test.sign(test.soa()), test.sign(delegation)...)
	check(t, v, msg("a.test.", dns.TypeA, 0, nil, ns), Bogus, dns.ExtendedErrorCodeNSECMissing)
	h := nsec3Hash("a.test.", 0)
	n3 := nsec3("test.", h, h, 0, false, dns.TypeNS, dns.TypeDS, dns.TypeRRSIG)
	ns3 := append(test.sign(test.soa()), test.sign(n3)...)
	check(t, v, msg("a.test.", dns.TypeA, 0, nil, ns3), Bogus, dns.ExtendedErrorCodeNSECMissing)
}

// A wildcard answer needs the proof that no closer name exists: an NSEC
// that covers the name asked but whose owner is the next closer name
// proves that name exists, so the wildcard above it could not have
// answered (RFC 4035 §5.3.4).
func TestWildcardNSECMustProveNoCloserMatch(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	// Signed as *.a.test. (Labels 2), served as x.b.a.test.; b.a.test. exists.
	signed := z.sign(rr("*.a.test. 300 IN A 192.0.2.9"))
	ans := []dns.RR{rr("x.b.a.test. 300 IN A 192.0.2.9"), signed[1]}
	ans[1].Header().Name = "x.b.a.test."
	v := w.validator(t, nil)
	check(t, v, msg("x.b.a.test.", dns.TypeA, 0, ans, z.sign(nsec("b.a.test.", "c.a.test.", dns.TypeA))), Bogus, dns.ExtendedErrorCodeNSECMissing)
	// The right proof: an NSEC covering b.a.test. itself.
	check(t, v, msg("x.b.a.test.", dns.TypeA, 0, ans, z.sign(nsec("a.a.test.", "c.a.test.", dns.TypeA))), Secure, 0)
}

// A negative trust anchor covers its name and the names below it, label by
// label: paypal.com. does not cover notpaypal.com. (RFC 7646 §1.1).
func TestNegativeTrustAnchorMatchesWholeLabels(t *testing.T) {
	v := newWorld(t).validator(t, func(c *Config) { c.NTAs = []string{"PayPal.com"} })
	for name, want := range map[string]string{
		"paypal.com.": "paypal.com.", "www.paypal.com.": "paypal.com.",
		"notpaypal.com.": "", "paypal.com.evil.": "", "com.": "",
	} {
		if got := v.nta(name); got != want {
			t.Errorf("nta(%s) = %q, want %q", name, got, want)
		}
	}
}

// A DS NODATA must come from the parent: the child's own NSEC or NSEC3 at
// its apex (SOA in the bitmap) proves nothing of the DS set, which the
// parent holds (RFC 4035 §5.4, RFC 5155 §8.6).
func TestChildApexDenialProvesNoDSAbsence(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	v := w.validator(t, nil)
	apexNSEC := nsec("a.test.", "b.a.test.", dns.TypeSOA, dns.TypeNS, dns.TypeDNSKEY, dns.TypeRRSIG, dns.TypeNSEC)
	check(t, v, msg("a.test.", dns.TypeDS, 0, nil, append(z.sign(z.soa()), z.sign(apexNSEC)...)), Bogus, dns.ExtendedErrorCodeNSECMissing)
	h := nsec3Hash("a.test.", 0)
	apexNSEC3 := nsec3("a.test.", h, h, 0, false, dns.TypeSOA, dns.TypeNS, dns.TypeDNSKEY, dns.TypeRRSIG)
	check(t, v, msg("a.test.", dns.TypeDS, 0, nil, append(z.sign(z.soa()), z.sign(apexNSEC3)...)), Bogus, dns.ExtendedErrorCodeNSECMissing)
}

// A secure negative answer is not kept past the expiration of the
// signatures over its proof either (RFC 4035 §5.3.3): ValidUntil, which
// the Guard caps the TTLs at, is set from them.
func TestSecureDenialValidUntilItsSignatures(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ED25519, true)
	soon := time.Now().Add(10 * time.Minute)
	ns := append(z.sign(z.soa()), z.signAt(time.Now().Add(-time.Hour), soon, nsec("www.a.test.", "x.a.test.", dns.TypeA))...)
	r := check(t, w.validator(t, nil), msg("www.a.test.", dns.TypeAAAA, 0, nil, ns), Secure, 0)
	if r.ValidUntil.IsZero() || r.ValidUntil.After(soon) {
		t.Fatalf("ValidUntil %v, want by the NSEC's expiration %v", r.ValidUntil, soon)
	}
}

// A bogus verdict is kept 30 seconds, however many zones below it are
// asked for meanwhile: storing a child's verdict, which is the parent's,
// must not push the parent's end further (nor write to a verdict other
// queries read).
func TestBogusVerdictEndsAfter30sWhateverIsAskedBelow(t *testing.T) {
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	bad := w.add("bad.test.", dns.ED25519, true)
	c1 := w.add("c1.bad.test.", dns.ED25519, true)
	c2 := w.add("c2.bad.test.", dns.ED25519, true)
	wrong, wrongPriv := genKey(t, "bad.test.", dns.ED25519, 257)
	other := &tzone{name: "bad.test.", key: wrong, priv: wrongPriv, signed: true}
	var broken atomic.Bool
	broken.Store(true)
	w.override = func(name string, qtype uint16) *dns.Msg {
		if broken.Load() && name == "bad.test." && qtype == dns.TypeDNSKEY {
			return msg(name, qtype, 0, other.sign(wrong), nil) // no key matches the DS
		}
		return nil
	}
	var now atomic.Int64
	now.Store(time.Now().Unix())
	v := w.validator(t, func(c *Config) { c.Now = func() time.Time { return time.Unix(now.Load(), 0) } })
	check(t, v, msg("www.c1.bad.test.", dns.TypeA, 0, c1.sign(rr("www.c1.bad.test. 300 IN A 192.0.2.1")), nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing)
	broken.Store(false) // the zone is fixed
	now.Add(20)
	check(t, v, msg("www.c2.bad.test.", dns.TypeA, 0, c2.sign(rr("www.c2.bad.test. 300 IN A 192.0.2.2")), nil), Bogus, dns.ExtendedErrorCodeDNSKEYMissing)
	now.Add(15) // 35 s after the first verdict
	check(t, v, msg("www.bad.test.", dns.TypeA, 0, bad.sign(rr("www.bad.test. 300 IN A 192.0.2.3")), nil), Secure, 0)
}
