package ddr

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

var passed = query.HandlerFunc(func(_ context.Context, r *query.Request) (*dns.Msg, error) {
	r.Event.Source = query.SourcePool
	return new(dns.Msg).SetReply(r.Msg), nil
})

func ask(t *testing.T, s *Stage, name string, qtype uint16) (*dns.Msg, *query.Event) {
	t.Helper()
	ev := &query.Event{}
	m, err := s.Answer(context.Background(), &query.Request{Msg: new(dns.Msg).SetQuestion(name, qtype), Event: ev}, passed)
	if err != nil {
		t.Fatal(err)
	}
	return m, ev
}

func TestStage_advertisesDoHAndDoT(t *testing.T) {
	s := New(Config{DoTPort: 853, DoHPort: 443, Hints: []netip.Addr{netip.MustParseAddr("192.168.1.2")},
		Names: func() []string { return []string{"*.home.example.org", "dns.home.example.org"} }})
	m, ev := ask(t, s, "_DNS.resolver.arpa.", dns.TypeSVCB)
	if ev.Source != query.SourceLocal || !m.Authoritative || len(m.Answer) != 2 {
		t.Fatalf("source %q, answer %v", ev.Source, m.Answer)
	}
	doh, dot := m.Answer[0].String(), m.Answer[1].String()
	for _, want := range []string{"1 dns.home.example.org.", `alpn="h2"`, `port="443"`, `dohpath="/dns-query{?dns}"`, `ipv4hint="192.168.1.2"`} {
		if !strings.Contains(doh, want) {
			t.Errorf("DoH record %s lacks %s", doh, want)
		}
	}
	for _, want := range []string{"2 dns.home.example.org.", `alpn="dot"`, `port="853"`} {
		if !strings.Contains(dot, want) {
			t.Errorf("DoT record %s lacks %s", dot, want)
		}
	}
	// The records survive the wire (the server packs them).
	if _, err := m.Pack(); err != nil {
		t.Fatal(err)
	}
}

func TestStage_nodataAndPassThrough(t *testing.T) {
	s := New(Config{DoTPort: 853, Names: func() []string { return []string{"dns.home.example.org"} }})
	if m, _ := ask(t, s, "_dns.resolver.arpa.", dns.TypeA); len(m.Answer) != 0 || m.Rcode != dns.RcodeSuccess {
		t.Errorf("A at _dns.resolver.arpa: %v, want NODATA", m)
	}
	if m, _ := ask(t, s, "x.resolver.arpa.", dns.TypeSVCB); len(m.Answer) != 0 || m.Rcode != dns.RcodeSuccess {
		t.Errorf("other name under resolver.arpa: %v, want NODATA", m)
	}
	if _, ev := ask(t, s, "resolver.arpa.example.", dns.TypeSVCB); ev.Source != query.SourcePool {
		t.Errorf("a name outside resolver.arpa was not passed on: source %q", ev.Source)
	}
	only := New(Config{DoTPort: 853, Names: func() []string { return []string{"*.wild.example"} }})
	if m, _ := ask(t, only, "_dns.resolver.arpa.", dns.TypeSVCB); len(m.Answer) != 0 {
		t.Errorf("a wildcard-only certificate was advertised: %v", m.Answer)
	}
}

// Issue 29 item 6: with DDR on, resolver.arpa's NODATA carries the zone's
// SOA (RFC 2308 §3), and its apex answers its own SOA and NS.
func TestStage_nodataCarriesTheSOAAndTheApexAnswersIt(t *testing.T) {
	s := New(Config{DoTPort: 853, Names: func() []string { return []string{"dns.home.example.org"} }})
	for _, q := range []struct {
		name  string
		qtype uint16
	}{{"_dns.resolver.arpa.", dns.TypeA}, {"x.resolver.arpa.", dns.TypeSVCB}, {"resolver.arpa.", dns.TypeTXT}} {
		m, _ := ask(t, s, q.name, q.qtype)
		if len(m.Answer) != 0 || len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA || m.Ns[0].Header().Name != "resolver.arpa." {
			t.Errorf("%s %s: answer %v authority %v, want NODATA with resolver.arpa's SOA", q.name, dns.TypeToString[q.qtype], m.Answer, m.Ns)
		}
	}
	for _, qt := range []uint16{dns.TypeSOA, dns.TypeNS} {
		m, _ := ask(t, s, "resolver.arpa.", qt)
		if len(m.Answer) != 1 || m.Answer[0].Header().Rrtype != qt || len(m.Ns) != 0 || !m.Authoritative {
			t.Errorf("resolver.arpa %s: answer %v authority %v, want the apex record", dns.TypeToString[qt], m.Answer, m.Ns)
		}
	}
	if m, _ := ask(t, s, "_dns.resolver.arpa.", dns.TypeSVCB); len(m.Ns) != 0 {
		t.Errorf("the SVCB answer carries an authority section: %v", m.Ns)
	}
}

// With DoQ and DoH3 served, DDR adds their SVCB records after DoH's and
// DoT's (RFC 9461: alpn "h3" with DoH's dohpath, alpn "doq"), each with its
// UDP port.
func TestStage_advertisesDoH3AndDoQAfterTheTCPServices(t *testing.T) {
	s := New(Config{DoTPort: 853, DoHPort: 443, DoQPort: 8853, DoH3Port: 8443,
		Names: func() []string { return []string{"dns.home.example.org"} }})
	m, _ := ask(t, s, "_dns.resolver.arpa.", dns.TypeSVCB)
	if len(m.Answer) != 4 {
		t.Fatalf("answer %v, want 4 SVCB records", m.Answer)
	}
	for i, want := range [][]string{
		{"1 dns.home.example.org.", `alpn="h2"`, `port="443"`},
		{"2 dns.home.example.org.", `alpn="dot"`, `port="853"`},
		{"3 dns.home.example.org.", `alpn="h3"`, `port="8443"`, `dohpath="/dns-query{?dns}"`},
		{"4 dns.home.example.org.", `alpn="doq"`, `port="8853"`},
	} {
		rr := m.Answer[i].String()
		for _, w := range want {
			if !strings.Contains(rr, w) {
				t.Errorf("record %d %s lacks %s", i, rr, w)
			}
		}
	}
	if strings.Contains(m.Answer[3].String(), "dohpath") {
		t.Errorf("the DoQ record carries a dohpath: %s", m.Answer[3])
	}
	if _, err := m.Pack(); err != nil {
		t.Fatal(err)
	}
}
