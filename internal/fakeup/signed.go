package fakeup

import (
	"strings"

	"github.com/miekg/dns"
)

// NSEC3Negative is a DNSSEC-signed negative answer for q's name in the
// zone example., as a validating resolver relays it to a DO query: the name
// is a CNAME to t.example., which has no record of q's type (NODATA behind
// a CNAME, RFC 2308 §2.2), proven by the NSEC3 record matching t.example.
// (RFC 5155 §7.2.3); the CNAME, the zone's SOA and the NSEC3 each with its
// RRSIG (ECDSA P-256, 64-byte signatures), AD set. The signatures are
// well-formed but sign nothing: no client here validates.
//
// For the name c3.example. it packs, compressed and with an OPT record, to
// about 500 bytes — under a 512-byte client's limit — while miekg/dns's
// Len() estimates it above 512: it counts the NSEC3 12 bytes longer than it
// packs and each RRSIG up to 2. A client must get it whole, without TC
// (RFC 2181 §9).
func NSEC3Negative(q *dns.Msg) *dns.Msg {
	r := new(dns.Msg)
	r.SetReply(q)
	r.RecursionAvailable, r.AuthenticatedData = true, true
	const zone, target, ttl = "example.", "t.example.", 3600
	hdr := func(name string, t uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	sig := func(name string, covered uint16) *dns.RRSIG {
		return &dns.RRSIG{Hdr: hdr(name, dns.TypeRRSIG), TypeCovered: covered, Algorithm: dns.ECDSAP256SHA256,
			Labels: uint8(dns.CountLabel(name)), OrigTtl: ttl, Expiration: 2000000000, Inception: 1700000000,
			KeyTag: 12345, SignerName: zone, Signature: strings.Repeat("A", 86) + "=="}
	}
	name := q.Question[0].Name
	r.Answer = []dns.RR{&dns.CNAME{Hdr: hdr(name, dns.TypeCNAME), Target: target}, sig(name, dns.TypeCNAME)}
	soa := &dns.SOA{Hdr: hdr(zone, dns.TypeSOA), Ns: "ns1." + zone, Mbox: "hostmaster." + zone,
		Serial: 2026120301, Refresh: 7200, Retry: 3600, Expire: 1209600, Minttl: ttl}
	nsec3 := &dns.NSEC3{Hdr: hdr("c3j7kvq64d4bs9arbvdm8fj3ifj7ff7e."+zone, dns.TypeNSEC3), Hash: dns.SHA1,
		HashLength: 20, NextDomain: "dth7e3rmcbnfcj8rv0e7hq1h0kqbvpqf", TypeBitMap: []uint16{dns.TypeA, dns.TypeRRSIG}}
	r.Ns = []dns.RR{soa, sig(zone, dns.TypeSOA), nsec3, sig(nsec3.Hdr.Name, dns.TypeNSEC3)}
	r.SetEdns0(1232, true)
	return r
}
