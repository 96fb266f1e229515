package server

import (
	"context"
	"crypto"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// BenchmarkCacheHitValidated is BenchmarkCacheHit for an answer the
// dnssec.Guard validated (secure, AD for the client that asked) beside the
// same answer unvalidated: docs/dnssec.md "What it costs" says a hit costs
// the same, since the verdict is the AD bit stored with the entry.
func BenchmarkCacheHitValidated(b *testing.B) {
	key := &dns.DNSKEY{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 3600}, Flags: 257, Protocol: 3, Algorithm: dns.ED25519}
	priv, err := key.Generate(256)
	if err != nil {
		b.Fatal(err)
	}
	sign := func(rr dns.RR) []dns.RR {
		sig := &dns.RRSIG{Hdr: dns.RR_Header{Name: rr.Header().Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 3600},
			Algorithm: dns.ED25519, Labels: uint8(dns.CountLabel(rr.Header().Name)), OrigTtl: 3600, KeyTag: key.KeyTag(), SignerName: "example.",
			Inception: uint32(time.Now().Add(-time.Hour).Unix()), Expiration: uint32(time.Now().Add(time.Hour).Unix())}
		if err := sig.Sign(priv.(crypto.Signer), []dns.RR{rr}); err != nil {
			b.Fatal(err)
		}
		return []dns.RR{rr, sig}
	}
	signed := sign(aRecord("bench.example.", "192.0.2.1"))
	keys := sign(key)
	answer := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return reply(q, signed...), testUpstream, nil
	})
	v, err := dnssec.New(dnssec.Config{Anchors: []dns.RR{key}, Fetch: func(_ context.Context, name string, qtype uint16) (*dns.Msg, error) {
		q := new(dns.Msg).SetQuestion(name, qtype)
		return reply(q, keys...), nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	guard := dnssec.NewGuard(v, dnssec.Enforce, func() bool { return true }, zap.NewNop(), &dnssec.Stats{}, time.Second)
	for _, c := range []struct {
		name string
		res  Resolver
	}{{"unvalidated", answer}, {"validated", guard.Wrap(exchangerOf(answer))}} {
		b.Run(c.name, func(b *testing.B) {
			ch := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
			st := ch.Stage()
			defer func() { st.Close(); ch.Close() }()
			s := New(Options{}, &State{Router: pool(c.res), Allow: loopback, Stages: []query.Stage{st}})
			q := newQuery("bench.example.", dns.TypeA)
			q.AuthenticatedData = true
			q.SetEdns0(1232, false)
			wire, _ := q.Pack()
			client := netip.MustParseAddr("127.0.0.1")
			ctx := context.Background()
			var out []byte
			for range 2 { // a miss, then a hit that leaves the template
				out = s.handle(ctx, wire, client, query.UDP)
			}
			first := new(dns.Msg)
			if err := first.Unpack(out); err != nil {
				b.Fatal(err)
			}
			if first.AuthenticatedData != (c.name == "validated") || len(first.Answer) != 1 {
				b.Fatalf("AD %v with %d records, want AD only when validated, and no RRSIG", first.AuthenticatedData, len(first.Answer))
			}
			var name [wireform.MaxName]byte
			dst := make([]byte, 0, maxUDPAnswer)
			var scratch query.Event
			b.ReportAllocs()
			for b.Loop() {
				out, g, ev, ok := s.answerFast(wire, &name, client, dst, &scratch)
				if !ok || len(out) == 0 {
					b.Fatal("not answered by the fast path")
				}
				s.finishFast(g, ev, true)
			}
		})
	}
}

// exchangerOf is a Resolver as the dnssec.Exchanger it already is.
func exchangerOf(r Resolver) dnssec.Exchanger { return r }
