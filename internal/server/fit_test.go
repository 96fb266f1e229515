package server

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/upstream"
)

func protoOf(tcp bool) query.Proto {
	if tcp {
		return query.TCP
	}
	return query.UDP
}

// hostileEDE answers SERVFAIL with a 65 000-byte EDE text, as the hostile
// DoT upstream of issue 13 finding 1 did.
func hostileEDE(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	m := reply(q)
	m.Rcode = dns.RcodeServerFailure
	m.SetEdns0(4096, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option,
		&dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeDNSBogus, ExtraText: strings.Repeat("é", 32500)})
	return m, testUpstream, nil
}

// hostileTSIG answers 60 KB of TXT with a TSIG as the last record, which
// Msg.Truncate refuses to truncate.
func hostileTSIG(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	var rrs []dns.RR
	for range 240 {
		rrs = append(rrs, &dns.TXT{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{strings.Repeat("x", 250)},
		})
	}
	m := reply(q, rrs...)
	m.Extra = append(m.Extra, &dns.TSIG{
		Hdr:       dns.RR_Header{Name: "key.example.", Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm: dns.HmacSHA256, TimeSigned: 1, Fudge: 300, MACSize: 4, MAC: "00000000", OrigId: q.Id,
	})
	return m, testUpstream, nil
}

// manyEDEs answers with ten thousand empty EDE options.
func manyEDEs(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	m := reply(q)
	m.SetEdns0(4096, false)
	for range 10000 {
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther})
	}
	return m, testUpstream, nil
}

// longTried fails naming many long upstream URLs, so nxdns's own EDE 23
// text on a long name is more than 512 bytes.
func longTried(_ context.Context, _ *dns.Msg) (*dns.Msg, string, error) {
	var tried []string
	for i := range 4 {
		tried = append(tried, "https://"+strings.Repeat(string(rune('a'+i)), 60)+".example:443")
	}
	return nil, tried[0], &upstream.QueryError{Kind: upstream.KindPeerTimeout, Tried: tried, Attributed: tried[0]}
}

// Every answer's final wire form fits the client's limit whatever the
// resolver sent (docs/design.md#answer-fit, issue 13 finding 1), and what was cut
// is announced: TC for records, the EDE's info code kept.
func TestAnswer_fitsClientLimitWhateverTheUpstreamSent(t *testing.T) {
	longName := strings.Repeat(strings.Repeat("n", 63)+".", 3) + "example."
	for _, tc := range []struct {
		name     string
		r        resolverFunc
		qname    string
		edns     uint16 // 0: no EDNS
		tcp      bool
		limit    int
		wantEDE  int // info code the answer must keep; -1 for none
		wantTC   bool
		wantTXTs bool // some records still relayed
	}{
		{"65 KB EDE, no EDNS", hostileEDE, "a.example.", 0, false, 512, -1, false, false},
		{"65 KB EDE, EDNS 512", hostileEDE, "a.example.", 512, false, 512, int(dns.ExtendedErrorCodeDNSBogus), false, false},
		{"65 KB EDE, EDNS 1232", hostileEDE, "a.example.", 1232, false, 1232, int(dns.ExtendedErrorCodeDNSBogus), false, false},
		{"65 KB EDE, TCP", hostileEDE, "a.example.", 1232, true, 65535, int(dns.ExtendedErrorCodeDNSBogus), false, false},
		{"60 KB TXT and TSIG, no EDNS", hostileTSIG, "a.example.", 0, false, 512, -1, true, true},
		{"60 KB TXT and TSIG, EDNS 1232", hostileTSIG, "a.example.", 1232, false, 1232, -1, true, true},
		{"10 000 EDEs, EDNS 512", manyEDEs, "a.example.", 512, false, 512, int(dns.ExtendedErrorCodeOther), false, false},
		{"own EDE 23 on a long name", longTried, longName, 512, false, 512, int(dns.ExtendedErrorCodeNetworkError), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{}, state(tc.r))
			q := newQuery(tc.qname, dns.TypeTXT)
			if tc.edns != 0 {
				q.SetEdns0(tc.edns, false)
			}
			wire := s.handle(context.Background(), mustPack(t, q), netip.MustParseAddr("127.0.0.1"), protoOf(tc.tcp))
			if wire == nil {
				t.Fatal("no answer")
			}
			if len(wire) > tc.limit {
				t.Fatalf("answer is %d bytes, client's limit %d", len(wire), tc.limit)
			}
			m := new(dns.Msg)
			if err := m.Unpack(wire); err != nil {
				t.Fatalf("answer does not decode: %v", err)
			}
			if m.Truncated != tc.wantTC {
				t.Errorf("TC = %v, want %v", m.Truncated, tc.wantTC)
			}
			if tc.wantTXTs && len(m.Answer) == 0 {
				t.Error("no record relayed; the ones that fit should be")
			}
			for _, rr := range append(append(m.Answer, m.Ns...), m.Extra...) {
				if rr.Header().Rrtype == dns.TypeTSIG {
					t.Error("a TSIG from the upstream was relayed")
				}
			}
			e := edeOf(m)
			switch {
			case tc.wantEDE < 0 && e != nil:
				t.Errorf("EDE %d sent to a client without EDNS", e.InfoCode)
			case tc.wantEDE >= 0 && (e == nil || int(e.InfoCode) != tc.wantEDE):
				t.Errorf("EDE %v, want info code %d", e, tc.wantEDE)
			}
			if opt := m.IsEdns0(); opt != nil && len(opt.Option) > maxRelayedEDEs {
				t.Errorf("%d EDE options relayed, want at most %d", len(opt.Option), maxRelayedEDEs)
			}
		})
	}
}

// A signed negative answer that packs to 494 bytes reaches a 512-byte
// client whole, without TC (RFC 2181 §9), although miekg/dns's estimate of
// it is over 512 (fakeup.NSEC3Negative).
func TestFit_sendsWholeAnAnswerTheEstimateSaysIsTooLarge(t *testing.T) {
	up := fakeup.NSEC3Negative(newQuery("c3.example.", dns.TypeTXT))
	if up.Len() <= 512 {
		t.Fatalf("the estimate is %d bytes: the answer does not test the estimate", up.Len())
	}
	s := New(Options{}, state(resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return fakeup.NSEC3Negative(q), testUpstream, nil
	})))
	q := newQuery("c3.example.", dns.TypeTXT)
	q.SetEdns0(512, true)
	wire := s.handle(context.Background(), mustPack(t, q), netip.MustParseAddr("127.0.0.1"), query.UDP)
	m := new(dns.Msg)
	if err := m.Unpack(wire); err != nil {
		t.Fatal(err)
	}
	if len(wire) > 512 || m.Truncated || len(m.Answer) != len(up.Answer) || len(m.Ns) != len(up.Ns) {
		t.Fatalf("%d bytes, TC %v, %d answer and %d authority records; want at most 512 bytes, no TC, %d and %d",
			len(wire), m.Truncated, len(m.Answer), len(m.Ns), len(up.Answer), len(up.Ns))
	}
}

// Every answer is compressed, also one that would fit uncompressed
// (docs/server.md "Handler"), over UDP and TCP.
func TestFit_compressesEveryAnswer(t *testing.T) {
	const name = "www.compressed-answer.example."
	s := New(Options{}, state(resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return reply(q, aRecord(name, "192.0.2.1"), aRecord(name, "192.0.2.2")), testUpstream, nil
	})))
	for _, tcp := range []bool{false, true} {
		wire := s.handle(context.Background(), mustPack(t, newQuery(name, dns.TypeA)), netip.MustParseAddr("127.0.0.1"), protoOf(tcp))
		m := new(dns.Msg)
		if err := m.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		m.Compress = true
		if want := m.Len(); len(wire) != want || len(m.Answer) != 2 {
			t.Errorf("TCP %v: %d bytes with %d records, want the two records compressed: %d bytes", tcp, len(wire), len(m.Answer), want)
		}
	}
}

// An answer whose only name is its question's packs to the bytes the
// compressed pack gave before fit stopped compressing it, with no
// allocation into a reused buffer; an answer with any other name is
// compressed as ever, shorter than uncompressed.
func TestFit_packsAnAnswerWhoseOnlyNameIsTheQuestionAsCompressed(t *testing.T) {
	withOPT := func(m *dns.Msg, opts ...dns.EDNS0) *dns.Msg {
		m.SetEdns0(1232, true)
		m.IsEdns0().Option = opts
		return m
	}
	q := newQuery("www.only-the-question.example.", dns.TypeA)
	long := newQuery(strings.Repeat(strings.Repeat("l", 62)+".", 4)[:250]+".", dns.TypeAAAA)
	nx := reply(q)
	nx.Rcode = dns.RcodeNameError
	servfail := reply(long)
	servfail.Rcode = dns.RcodeServerFailure
	name := q.Question[0].Name
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns: "ns.example.", Mbox: "hostmaster.example.", Serial: 1, Refresh: 2, Retry: 3, Expire: 4, Minttl: 5}
	negative := reply(q)
	negative.Ns = []dns.RR{soa}
	cname := reply(q, &dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: "edge." + name})
	for _, c := range []struct {
		what    string
		m       *dns.Msg
		shorter bool // compression shortens it: a name besides the question's
	}{
		{"empty NOERROR", withOPT(reply(q)), false},
		{"no OPT", reply(q), false},
		{"NXDOMAIN, EDE naming the question", withOPT(nx, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeBlocked, ExtraText: name}), false},
		{"SERVFAIL on a 250-octet name, padded", withOPT(servfail, &dns.EDNS0_PADDING{Padding: make([]byte, 40)}), false},
		{"an A record", withOPT(reply(q, aRecord(name, "192.0.2.1"))), true},
		{"an SOA in authority", withOPT(negative), true},
		{"a CNAME", cname, true},
	} {
		old := c.m.Copy()
		old.Compress = true
		want, err := old.Pack()
		if err != nil {
			t.Fatal(err)
		}
		plain := c.m.Copy()
		plain.Compress = false
		uncompressed, _ := plain.Pack()
		got, err := fit(c.m, dns.MaxMsgSize, make([]byte, 1500))
		if err != nil || string(got) != string(want) {
			t.Fatalf("%s: fit packed %x (%v), compressed %x", c.what, got, err, want)
		}
		if c.shorter != (len(got) < len(uncompressed)) {
			t.Errorf("%s: %d bytes, %d uncompressed; want compression to shorten it: %v", c.what, len(got), len(uncompressed), c.shorter)
		}
	}
	m, buf := withOPT(reply(q)), make([]byte, 1500) // an option would allocate its own packed bytes (miekg/dns)
	if allocs := testing.AllocsPerRun(100, func() { _, _ = fit(m, 1232, buf) }); allocs != 0 {
		t.Errorf("%.0f allocations to pack an answer whose only name is its question, want 0", allocs)
	}
}

// BenchmarkFit is an answer sized and packed into a reused buffer: one
// whose only name is its question's, and one with a record.
func BenchmarkFit(b *testing.B) {
	q := newQuery("www.example.com.", dns.TypeA)
	for _, c := range []struct {
		what string
		m    *dns.Msg
	}{
		{"question only", reply(q)},
		{"one record", reply(q, aRecord("www.example.com.", "192.0.2.1"))},
	} {
		c.m.SetEdns0(1232, false)
		buf := make([]byte, 1500)
		b.Run(c.what, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := fit(c.m, 1232, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A relayed EDE text is bounded even when the answer would fit over TCP,
// and cut at a UTF-8 boundary.
func TestRelay_boundsEDETextAtRuneBoundary(t *testing.T) {
	s := New(Options{}, state(resolverFunc(hostileEDE)))
	q := newQuery("a.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	m := new(dns.Msg)
	if err := m.Unpack(s.handle(context.Background(), mustPack(t, q), netip.MustParseAddr("127.0.0.1"), query.TCP)); err != nil {
		t.Fatal(err)
	}
	e := edeOf(m)
	if e == nil {
		t.Fatal("no EDE relayed")
	}
	if n := len(e.ExtraText); n > maxRelayedEDEText || n < maxRelayedEDEText-1 {
		t.Errorf("relayed EDE text is %d bytes, want %d (or one less at a rune boundary)", n, maxRelayedEDEText)
	}
	if !strings.HasPrefix(strings.Repeat("é", 100), e.ExtraText) {
		t.Errorf("text cut inside a character: %q", e.ExtraText[len(e.ExtraText)-3:])
	}
}

func TestTruncateUTF8(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"aé", 3, "aé"}, {"é", 0, ""},
	} {
		if got := truncateUTF8(tc.s, tc.n); got != tc.want {
			t.Errorf("truncateUTF8(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// A signed answer too large for a 512-byte client goes out with TC and only
// RRsets it can send with their signatures: never an NSEC3 whose RRSIG was
// cut, nor an RRSIG without its records (RFC 4035 §3.1.1; Unbound's
// truncation, docs/protocol.md). Names of every length put the cut at every
// place in the authority section.
func TestFit_truncatedAnswerKeepsSignedRRsetsWhole(t *testing.T) {
	big := func(q *dns.Msg) *dns.Msg {
		r := fakeup.NSEC3Negative(q)
		// Two more NSEC3 records with their RRSIGs, as an NXDOMAIN proof
		// has: the answer no longer fits 512 bytes.
		for _, owner := range []string{"0p9mhaveqvm6t7vbl5lop2u3t2rp3tom.example.", "k8udemvp1j2f7eg6jebps17vp3n8i58h.example."} {
			n := dns.Copy(r.Ns[2]).(*dns.NSEC3)
			n.Hdr.Name = owner
			sig := dns.Copy(r.Ns[3]).(*dns.RRSIG)
			sig.Hdr.Name = owner
			r.Ns = append(r.Ns, n, sig)
		}
		return r
	}
	s := New(Options{}, state(resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return big(q), testUpstream, nil
	})))
	type set struct {
		name string
		t    uint16
	}
	for n := 1; n <= 60; n++ {
		name := strings.Repeat("x", n) + ".example."
		q := newQuery(name, dns.TypeTXT)
		q.SetEdns0(512, true)
		wire := s.handle(context.Background(), mustPack(t, q), netip.MustParseAddr("127.0.0.1"), query.UDP)
		m := new(dns.Msg)
		if err := m.Unpack(wire); err != nil {
			t.Fatal(err)
		}
		if len(wire) > 512 || !m.Truncated {
			t.Fatalf("%s: %d bytes, TC %v; want at most 512 with TC", name, len(wire), m.Truncated)
		}
		for _, sec := range [][]dns.RR{m.Answer, m.Ns} {
			records, sigs := map[set]int{}, map[set]int{}
			for _, rr := range sec {
				if sig, ok := rr.(*dns.RRSIG); ok {
					sigs[set{strings.ToLower(rr.Header().Name), sig.TypeCovered}]++
				} else {
					records[set{strings.ToLower(rr.Header().Name), rr.Header().Rrtype}]++
				}
			}
			for k := range records {
				if sigs[k] == 0 {
					t.Errorf("%s: %s %s sent without its RRSIG", name, k.name, dns.TypeToString[k.t])
				}
			}
			for k := range sigs {
				if records[k] == 0 {
					t.Errorf("%s: RRSIG of %s %s sent without its records", name, k.name, dns.TypeToString[k.t])
				}
			}
		}
	}
}
