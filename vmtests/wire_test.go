package vmtests

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/pathemu"
)

// The wire details third-party suites check (issue 29), asked by kdig of
// the real binary over every transport it serves: AD for a client that sets
// AD without DO (RFC 6840 §5.7–5.8), EDNS padding on DoT and DoH (RFC 7830,
// RFC 8467), no TC on an answer that fits (RFC 2181 §9), RRSIG and NSEC for
// ANY without DO (RFC 3225 §3), compressed answers, a TTL with the top
// bit set sent as 0 (RFC 2181 §8), and DDR's NODATA with its SOA (RFC 2308
// §3).

// wireUpstream answers as a validating resolver over DoT would, by name,
// and keeps what it saw of nxdns's queries.
type wireUpstream struct {
	mu   sync.Mutex
	seen map[string]seenQuery // by lower-case name
}

// seenQuery is one query nxdns sent on, as the upstream read it.
type seenQuery struct {
	ad     bool
	padded bool // an EDNS Padding option, the whole query a multiple of 128 octets
}

func (u *wireUpstream) saw(name string) (seenQuery, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.seen[name]
	return s, ok
}

func (u *wireUpstream) answer(_ context.Context, q *dns.Msg) *dns.Msg {
	qq := q.Question[0]
	name := strings.ToLower(qq.Name)
	o := q.IsEdns0()
	s := seenQuery{ad: q.AuthenticatedData}
	if o != nil && len(o.Option) > 0 && o.Option[len(o.Option)-1].Option() == dns.EDNS0PADDING {
		wire, err := q.Pack()
		s.padded = err == nil && len(wire)%128 == 0
	}
	u.mu.Lock()
	u.seen[name] = s
	u.mu.Unlock()

	hdr := func(t uint16, ttl uint32) dns.RR_Header {
		return dns.RR_Header{Name: qq.Name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
	}
	a := func(ttl uint32, i byte) dns.RR { return &dns.A{Hdr: hdr(dns.TypeA, ttl), A: net.IPv4(192, 0, 2, i)} }
	if strings.HasPrefix(name, "c3.") {
		return fakeup.NSEC3Negative(q)
	}
	r := new(dns.Msg)
	r.SetReply(q)
	r.RecursionAvailable = true
	// RFC 6840 §5.8: a validating resolver sets AD for a query with AD or DO.
	r.AuthenticatedData = q.AuthenticatedData || o != nil && o.Do()
	if o != nil {
		r.SetEdns0(1232, o.Do())
	}
	switch {
	case strings.HasPrefix(name, "topbit."):
		r.Answer = []dns.RR{a(1<<31+5, 1)}
	case strings.HasPrefix(name, "many."):
		for i := range 10 {
			r.Answer = append(r.Answer, a(300, byte(i+1)))
		}
	case qq.Qtype == dns.TypeANY:
		r.Answer = []dns.RR{a(300, 1),
			&dns.RRSIG{Hdr: hdr(dns.TypeRRSIG, 300), TypeCovered: dns.TypeA, Algorithm: dns.ECDSAP256SHA256, Labels: 2, OrigTtl: 300,
				Expiration: 2000000000, Inception: 1700000000, KeyTag: 1, SignerName: "example.", Signature: strings.Repeat("A", 86) + "=="},
			&dns.NSEC{Hdr: hdr(dns.TypeNSEC, 300), NextDomain: "z.example.", TypeBitMap: []uint16{dns.TypeA, dns.TypeRRSIG, dns.TypeNSEC}}}
	case qq.Qtype == dns.TypeA:
		r.Answer = []dns.RR{a(300, 1)}
	}
	return r
}

// kdigReply is what kdig printed of one answer.
type kdigReply struct {
	out      string
	flags    []string // the header's flags: qr, rd, ra, ad, tc…
	received int      // the answer's size in bytes
	padding  int      // the EDNS Padding option's length; -1 without one
	answer   [][]string
	counts   map[string]int // QUERY, ANSWER, AUTHORITY, ADDITIONAL
}

func (r kdigReply) flag(f string) bool {
	for _, x := range r.flags {
		if x == f {
			return true
		}
	}
	return false
}

var (
	kdigFlags    = regexp.MustCompile(`;; Flags: ([a-z ]*);(.*)`)
	kdigCount    = regexp.MustCompile(`([A-Z]+): (\d+)`)
	kdigReceived = regexp.MustCompile(`;; Received (\d+) B`)
	kdigPadding  = regexp.MustCompile(`;; PADDING: (\d+) B`)
)

// kdig asks the node with the transport's flags ("" for UDP, "+tcp",
// "+tls", "+https") and the given options, and reads the answer.
func (n *tlsNode) kdig(t *testing.T, transport string, args ...string) kdigReply {
	t.Helper()
	kdig := tool(t, "kdig", "knot-dnsutils")
	addr := n.dns
	switch transport {
	case "+tls":
		addr = n.dot
	case "+https":
		addr = n.doh
	}
	host, port, _ := net.SplitHostPort(addr)
	full := []string{"@" + host, "-p", port, "+timeout=5", "+retry=0"}
	if transport != "" {
		full = append(full, transport)
	}
	if transport == "+tls" || transport == "+https" {
		full = append(full, "+tls-ca="+n.ca.file, "+tls-hostname=dns.home.test")
	}
	out, err := run(t, kdig, append(full, args...)...)
	if err != nil {
		t.Fatalf("kdig %s %v: %v\n%s", transport, args, err, out)
	}
	r := kdigReply{out: out, padding: -1, counts: map[string]int{}}
	m := kdigFlags.FindStringSubmatch(out)
	rec := kdigReceived.FindStringSubmatch(out)
	if m == nil || rec == nil {
		t.Fatalf("kdig %s %v: no header or size in\n%s", transport, args, out)
	}
	r.flags = strings.Fields(m[1])
	for _, c := range kdigCount.FindAllStringSubmatch(m[2], -1) {
		r.counts[c[1]], _ = strconv.Atoi(c[2])
	}
	r.received, _ = strconv.Atoi(rec[1])
	if p := kdigPadding.FindStringSubmatch(out); p != nil {
		r.padding, _ = strconv.Atoi(p[1])
	}
	section := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, ";; ") && strings.HasSuffix(line, "SECTION:"):
			section = line
		case line == "" || strings.HasPrefix(line, ";"):
		case section == ";; ANSWER SECTION:":
			r.answer = append(r.answer, strings.Fields(line))
		}
	}
	return r
}

func TestWireProtocol(t *testing.T) {
	skipShort(t)
	tool(t, "kdig", "knot-dnsutils")
	ca := newTestCA(t)
	up := &wireUpstream{seen: map[string]seenQuery{}}
	hooks := &fakeup.Hooks{Answer: up.answer}
	n := startTLSNxdnsWith(t, ca, nil, startUpstreamWith(t, ca, "dot://127.0.0.1:0", pathemu.Path{}, func(c *fakeup.Config) {
		c.Listen[0].Hooks = hooks
	}))

	// dig's default query (AD=1, DO=0) gets AD on its miss, on the general
	// path's hit and on the fast path's; a query with neither gets none,
	// although the upstream was asked with AD=1 for it too.
	t.Run("AD without DO", func(t *testing.T) {
		for _, transport := range []string{"", "+tls"} {
			name := fmt.Sprintf("ad%s.example.", strings.TrimPrefix(transport, "+"))
			for i := range 3 {
				if r := n.kdig(t, transport, "+adflag", "+nodnssec", name, "A"); !r.flag("ad") {
					t.Errorf("%q, query %d: flags %v, want ad\n%s", transport, i+1, r.flags, r.out)
				}
				if r := n.kdig(t, transport, "+noadflag", "+nodnssec", name, "A"); r.flag("ad") {
					t.Errorf("%q, query %d: AD to a client with neither AD nor DO\n%s", transport, i+1, r.out)
				}
			}
			plain := "plain" + name
			n.kdig(t, transport, "+noadflag", "+nodnssec", plain, "A")
			if s, ok := up.saw(plain); !ok || !s.ad {
				t.Errorf("%q: the upstream was asked %+v (seen %v) for a client without AD, want AD=1", transport, s, ok)
			}
			if r := n.kdig(t, transport, "+adflag", plain, "A"); !r.flag("ad") {
				t.Errorf("%q: the entry a plain client filled gave no AD to a client with AD\n%s", transport, r.out)
			}
		}
	})

	// kdig +padding over DoT and DoH gets an answer padded to 468 octets;
	// over UDP and TCP none. The queries nxdns sends its DoT upstream are
	// padded to 128.
	t.Run("padding", func(t *testing.T) {
		for _, transport := range []string{"+tls", "+https", "", "+tcp"} {
			name := fmt.Sprintf("pad%s.example.", strings.TrimPrefix(transport, "+"))
			r := n.kdig(t, transport, "+padding", name, "A")
			encrypted := transport == "+tls" || transport == "+https"
			if encrypted && (r.padding < 0 || r.received%468 != 0) || !encrypted && r.padding >= 0 {
				t.Errorf("%q: %d bytes, padding %d; want padding to a multiple of 468 over DoT and DoH only\n%s", transport, r.received, r.padding, r.out)
			}
			if s, ok := up.saw(name); !ok || !s.padded {
				t.Errorf("%q: the upstream query was %+v (seen %v), want padded to a multiple of 128", transport, s, ok)
			}
		}
	})

	// A 494-byte signed negative answer reaches a 512-byte client whole,
	// from the upstream and from the cache.
	t.Run("no TC when the answer fits", func(t *testing.T) {
		for i := range 2 {
			// +ignore: the UDP answer itself, not kdig's retry over TCP on TC.
			r := n.kdig(t, "", "+ignore", "+bufsize=512", "+dnssec", "c3.example.", "TXT")
			if r.flag("tc") || r.received > 512 || r.counts["ANSWER"] != 2 || r.counts["AUTHORITY"] != 4 {
				t.Errorf("query %d: flags %v, %d bytes, counts %v; want no tc, at most 512 bytes, 2 answer and 4 authority records\n%s",
					i+1, r.flags, r.received, r.counts, r.out)
			}
		}
	})

	// ANY without DO keeps the RRSIG and NSEC records at the name.
	t.Run("ANY without DO", func(t *testing.T) {
		for i := range 2 {
			r := n.kdig(t, "", "+nodnssec", "any.example.", "ANY")
			var types []string
			for _, f := range r.answer {
				if len(f) > 3 {
					types = append(types, f[3])
				}
			}
			if strings.Join(types, " ") != "A RRSIG NSEC" {
				t.Errorf("query %d: answer types %v, want A RRSIG NSEC\n%s", i+1, types, r.out)
			}
		}
	})

	// Ten A records go out compressed over UDP and TCP, although they
	// would fit uncompressed.
	t.Run("compression", func(t *testing.T) {
		want := new(dns.Msg).SetQuestion("many.example.", dns.TypeA)
		want.Response = true
		for i := range 10 {
			want.Answer = append(want.Answer, &dns.A{Hdr: dns.RR_Header{Name: "many.example.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, byte(i+1))})
		}
		want.Compress = true
		size := want.Len()
		for _, transport := range []string{"", "+tcp"} {
			r := n.kdig(t, transport, "+ignore", "+noedns", "many.example.", "A")
			if r.received != size || len(r.answer) != 10 {
				t.Errorf("%q: %d bytes with %d records, want 10 records in %d bytes, compressed\n%s", transport, r.received, len(r.answer), size, r.out)
			}
		}
	})

	// A TTL of 2^31 + 5 from the upstream goes out as 0 on every transport.
	t.Run("TTL with the top bit set", func(t *testing.T) {
		for _, transport := range []string{"", "+tcp", "+tls", "+https"} {
			r := n.kdig(t, transport, "topbit.example.", "A")
			if len(r.answer) != 1 || len(r.answer) > 0 && r.answer[0][1] != "0" {
				t.Errorf("%q: answer %v, want one A with TTL 0\n%s", transport, r.answer, r.out)
			}
		}
	})

	// Item 6 with DDR on (nxdns serves DoT and DoH here, so the DDR stage
	// answers resolver.arpa): its SVCB records, the zone's SOA and NS at
	// the apex, and every other question an authoritative NODATA that
	// carries the SOA (RFC 2308 §3).
	t.Run("resolver.arpa with DDR on", func(t *testing.T) {
		if r := n.kdig(t, "", "_dns.resolver.arpa.", "SVCB"); r.counts["ANSWER"] == 0 {
			t.Fatalf("no SVCB records: DDR is off\n%s", r.out)
		}
		for _, q := range [][2]string{{"resolver.arpa.", "SOA"}, {"resolver.arpa.", "NS"}} {
			r := n.kdig(t, "", q[0], q[1])
			if len(r.answer) != 1 || r.answer[0][3] != q[1] || !r.flag("aa") {
				t.Errorf("%s %s: answer %v, flags %v; want its %s, aa\n%s", q[0], q[1], r.answer, r.flags, q[1], r.out)
			}
		}
		for _, q := range [][2]string{{"resolver.arpa.", "A"}, {"_dns.resolver.arpa.", "A"}, {"x.resolver.arpa.", "TXT"}} {
			r := n.kdig(t, "", q[0], q[1])
			if !strings.Contains(r.out, "status: NOERROR") || r.counts["ANSWER"] != 0 || r.counts["AUTHORITY"] != 1 ||
				!strings.Contains(r.out, "SOA") || !r.flag("aa") {
				t.Errorf("%s %s: want an authoritative NODATA with resolver.arpa.'s SOA\n%s", q[0], q[1], r.out)
			}
		}
	})
}
