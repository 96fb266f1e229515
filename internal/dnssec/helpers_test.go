package dnssec

import (
	"context"
	"crypto"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The tests sign their own zones with miekg/dns: a world is a hierarchy of
// zones (a test root, TLDs, children), each with one key, that answers the
// validator's DS and DNSKEY fetches as a recursive upstream would.

type tzone struct {
	name   string
	key    *dns.DNSKEY
	priv   crypto.Signer
	signed bool
	parent *tzone
}

var keyAlgBits = map[uint8]int{
	dns.RSASHA1: 1024, dns.RSASHA256: 1024, dns.RSASHA512: 1024,
	dns.ECDSAP256SHA256: 256, dns.ECDSAP384SHA384: 384, dns.ED25519: 256,
}

func genKey(t testing.TB, name string, alg uint8, flags uint16) (*dns.DNSKEY, crypto.Signer) {
	t.Helper()
	k := &dns.DNSKEY{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600}, Flags: flags, Protocol: 3, Algorithm: alg}
	priv, err := k.Generate(keyAlgBits[alg])
	if err != nil {
		t.Fatalf("generate %s key: %v", dns.AlgorithmToString[alg], err)
	}
	return k, priv.(crypto.Signer)
}

type world struct {
	t       testing.TB
	zones   map[string]*tzone
	exists  map[string][]uint16 // names with records, by zone data
	fetches atomic.Int64
	// override answers a fetch instead of the world, when it returns non-nil.
	override func(name string, qtype uint16) *dns.Msg
}

func newWorld(t testing.TB) *world {
	w := &world{t: t, zones: map[string]*tzone{}, exists: map[string][]uint16{}}
	w.add(".", dns.ECDSAP256SHA256, true)
	return w
}

// add makes a zone; signed zones get a key with the SEP flag used for
// everything (a combined signing key), and a DS in their parent.
func (w *world) add(name string, alg uint8, signed bool) *tzone {
	z := &tzone{name: name, signed: signed}
	if signed {
		z.key, z.priv = genKey(w.t, name, alg, 257)
	}
	if name != "." {
		z.parent = w.zoneOf(parent(name))
	}
	w.zones[name] = z
	return z
}

// zoneOf is the deepest zone at or above name.
func (w *world) zoneOf(name string) *tzone {
	for n := name; ; n = parent(n) {
		if z, ok := w.zones[n]; ok {
			return z
		}
	}
}

func (w *world) anchor() []dns.RR { return []dns.RR{w.zones["."].key.ToDS(dns.SHA256)} }

func (w *world) validator(t testing.TB, mod func(*Config)) *Validator {
	t.Helper()
	c := Config{Anchors: w.anchor(), Fetch: w.fetch}
	if mod != nil {
		mod(&c)
	}
	v, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func rr(s string) dns.RR {
	r, err := dns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return r
}

// sign returns rrs followed by z's RRSIG over them, valid an hour either
// side of now.
func (z *tzone) sign(rrs ...dns.RR) []dns.RR {
	return z.signAt(time.Now().Add(-time.Hour), time.Now().Add(time.Hour), rrs...)
}

func (z *tzone) signAt(inception, expiration time.Time, rrs ...dns.RR) []dns.RR {
	h := rrs[0].Header()
	sig := &dns.RRSIG{
		Hdr:         dns.RR_Header{Name: h.Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: h.Ttl},
		TypeCovered: h.Rrtype, Algorithm: z.key.Algorithm, Labels: uint8(labels(h.Name)), OrigTtl: h.Ttl,
		Expiration: uint32(expiration.Unix()), Inception: uint32(inception.Unix()),
		KeyTag: z.key.KeyTag(), SignerName: z.name,
	}
	if err := sig.Sign(z.priv, rrs); err != nil {
		panic(err)
	}
	return append(append([]dns.RR{}, rrs...), sig)
}

func (z *tzone) ds() *dns.DS { return z.key.ToDS(dns.SHA256) }

func msg(name string, qtype uint16, rcode int, answer, ns []dns.RR) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.Rcode, m.Answer, m.Ns = true, rcode, answer, ns
	return m
}

func (z *tzone) soa() dns.RR {
	return rr(fmt.Sprintf("%s 300 IN SOA ns.%s h.%s 1 7200 3600 86400 300", z.name, z.name, z.name))
}

// nsec is an NSEC from owner to next listing types.
func nsec(owner, next string, types ...uint16) *dns.NSEC {
	types = slices.Clone(types)
	slices.Sort(types)
	return &dns.NSEC{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: 300}, NextDomain: next, TypeBitMap: types}
}

// nsec3For is an NSEC3 of zone z whose owner is the hash of name (or of
// the hash given), the next hash given.
func nsec3Hash(name string, iter uint16) string { return dns.HashName(name, dns.SHA1, iter, "") }

func nsec3(zone, ownerHash, nextHash string, iter uint16, optout bool, types ...uint16) *dns.NSEC3 {
	types = slices.Clone(types)
	slices.Sort(types)
	var flags uint8
	if optout {
		flags = 1
	}
	return &dns.NSEC3{Hdr: dns.RR_Header{Name: strings.ToLower(ownerHash) + "." + zone, Rrtype: dns.TypeNSEC3, Class: dns.ClassINET, Ttl: 300},
		Hash: dns.SHA1, Flags: flags, Iterations: iter, SaltLength: 0, Salt: "", HashLength: 20, NextDomain: nextHash, TypeBitMap: types}
}

// fetch answers as a recursive upstream over the world would.
func (w *world) fetch(_ context.Context, name string, qtype uint16) (*dns.Msg, error) {
	w.fetches.Add(1)
	name = canonical(name)
	if w.override != nil {
		if m := w.override(name, qtype); m != nil {
			return m, nil
		}
	}
	switch qtype {
	case dns.TypeDNSKEY:
		if z, ok := w.zones[name]; ok && z.signed {
			return msg(name, qtype, dns.RcodeSuccess, z.sign(z.key), nil), nil
		}
	case dns.TypeDS:
		if z, ok := w.zones[name]; ok && name != "." {
			p := z.parent
			if z.signed {
				return msg(name, qtype, dns.RcodeSuccess, p.sign(z.ds()), nil), nil
			}
			return w.denial(p, name, dns.RcodeSuccess, nsec(name, "\\000."+name, dns.TypeNS, dns.TypeRRSIG, dns.TypeNSEC)), nil
		}
	}
	z := w.zoneOf(name)
	if types, ok := w.exists[name]; ok {
		return w.denial(z, name, dns.RcodeSuccess, nsec(name, "\\000."+name, append(types, dns.TypeRRSIG, dns.TypeNSEC)...)), nil
	}
	if name == z.name {
		return w.denial(z, name, dns.RcodeSuccess, nsec(name, "\\000."+name, dns.TypeSOA, dns.TypeNS, dns.TypeDNSKEY, dns.TypeRRSIG, dns.TypeNSEC)), nil
	}
	return w.denial(z, name, dns.RcodeNameError, nsec(z.name, "~."+z.name, dns.TypeSOA, dns.TypeNS, dns.TypeDNSKEY, dns.TypeRRSIG, dns.TypeNSEC)), nil
}

// denial is z's negative answer with n as its proof (unsigned zones: the
// SOA alone). An NXDOMAIN's covering NSEC from the apex also covers the
// wildcard.
func (w *world) denial(z *tzone, name string, rcode int, n *dns.NSEC) *dns.Msg {
	if !z.signed {
		return msg(name, dns.TypeDS, rcode, nil, []dns.RR{z.soa()})
	}
	ns := append(z.sign(z.soa()), z.sign(n)...)
	return msg(name, dns.TypeDS, rcode, nil, ns)
}

func check(t *testing.T, v *Validator, m *dns.Msg, want Status, wantEDE uint16) Result {
	t.Helper()
	r := v.Validate(context.Background(), m)
	if r.Status != want || (want == Bogus && r.EDE != wantEDE) {
		t.Fatalf("verdict %v EDE %d, want %v EDE %d", r, r.EDE, want, wantEDE)
	}
	return r
}
