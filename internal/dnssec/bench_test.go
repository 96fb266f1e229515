package dnssec

import (
	"context"
	"testing"

	"github.com/miekg/dns"
)

// The per-query bound, measured (docs/dnssec.md "Bounds"): the cost of the
// worst answers the package comment's caps allow, beside an ordinary one.

// BenchmarkValidate is one secure answer (ECDSA P-256 zone under the test
// root and test.): "warm" with the zones' keys already validated (a
// validator's steady state), "cold" with a new validator each time, the
// whole chain fetched from memory and checked.
func BenchmarkValidate(b *testing.B) {
	w := newWorld(b)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ECDSAP256SHA256, true)
	m := msg("www.a.test.", dns.TypeA, 0, z.sign(rr("www.a.test. 300 IN A 192.0.2.1")), nil)
	b.Run("warm", func(b *testing.B) {
		v := w.validator(b, nil)
		v.Validate(context.Background(), m)
		for b.Loop() {
			if r := v.Validate(context.Background(), m); r.Status != Secure {
				b.Fatal(r)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			v := w.validator(b, nil)
			if r := v.Validate(context.Background(), m); r.Status != Secure {
				b.Fatal(r)
			}
		}
	})
}

// BenchmarkKeyTrap is TestKeyTrapIsBounded's answer, 500 keys and a
// hundred RRSIGs naming them, validated again and again: each costs the
// capped number of signature checks, then bogus.
func BenchmarkKeyTrap(b *testing.B) {
	w, m := keyTrap(b, dns.ECDSAP256SHA256)
	v := w.validator(b, nil)
	v.Validate(context.Background(), m)
	var sigs int
	for b.Loop() {
		var r Result
		r, sigs, _ = v.ValidateCounted(context.Background(), m)
		if r.Status != Bogus {
			b.Fatal(r)
		}
	}
	b.ReportMetric(float64(sigs), "sigchecks/op")
}

// BenchmarkNSEC3Hashes is an NXDOMAIN proven by NSEC3 at the largest
// iteration count still validated (150), with the hashes it needs: the
// cost RFC 9276's limit leaves.
func BenchmarkNSEC3Hashes(b *testing.B) {
	w := newWorld(b)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z := w.add("a.test.", dns.ECDSAP256SHA256, true)
	lo, hi := "00000000000000000000000000000000", "VVVVVVVVVVVVVVVVVVVVVVVVVVVVVVVV"
	// One record owned by the apex's hash would be needed for a secure
	// proof; a covering one alone makes the proof fail after hashing, which
	// is the worst case for the work spent.
	ns := append(z.sign(z.soa()), z.sign(nsec3("a.test.", lo, hi, MaxNSEC3Iterations, false, dns.TypeA))...)
	m := msg("x.y.z.nope.a.test.", dns.TypeA, dns.RcodeNameError, nil, ns)
	v := w.validator(b, nil)
	v.Validate(context.Background(), m)
	var hashes int
	for b.Loop() {
		_, _, hashes = v.ValidateCounted(context.Background(), m)
	}
	b.ReportMetric(float64(hashes), "hashes/op")
}
