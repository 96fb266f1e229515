package local

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// upstream stands for the rest of the chain: it counts what reaches it.
type upstream struct{ got []string }

func (u *upstream) Answer(_ context.Context, r *query.Request) (*dns.Msg, error) {
	u.got = append(u.got, r.Msg.Question[0].Name)
	resp := new(dns.Msg)
	resp.SetReply(r.Msg)
	return resp, nil
}

func newStage(t *testing.T, o Options) *Stage {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ask(t *testing.T, s *Stage, name string, qtype uint16) (*dns.Msg, *query.Event, *upstream) {
	t.Helper()
	u := &upstream{}
	req := &query.Request{
		Msg:      new(dns.Msg).SetQuestion(name, qtype),
		Deadline: time.Now().Add(time.Second),
		Event:    &query.Event{Client: netip.MustParseAddr("192.168.1.9")},
	}
	resp, err := s.Answer(context.Background(), req, u)
	if err != nil {
		t.Fatal(err)
	}
	return resp, req.Event, u
}

// local asks and requires a local answer with rcode.
func local(t *testing.T, s *Stage, name string, qtype uint16, rcode int) *dns.Msg {
	t.Helper()
	resp, ev, u := ask(t, s, name, qtype)
	if len(u.got) != 0 {
		t.Fatalf("%s %s went on down the chain", name, dns.TypeToString[qtype])
	}
	if ev.Source != query.SourceLocal {
		t.Errorf("%s: source %q, want local", name, ev.Source)
	}
	if resp.Rcode != rcode {
		t.Errorf("%s %s: rcode %s, want %s", name, dns.TypeToString[qtype], dns.RcodeToString[resp.Rcode], dns.RcodeToString[rcode])
	}
	if !resp.Authoritative {
		t.Errorf("%s: AA not set", name)
	}
	return resp
}

func forwarded(t *testing.T, s *Stage, name string, qtype uint16) {
	t.Helper()
	_, ev, u := ask(t, s, name, qtype)
	if len(u.got) != 1 {
		t.Fatalf("%s %s was answered locally, want it passed on", name, dns.TypeToString[qtype])
	}
	if ev.Source != "" {
		t.Errorf("%s: the stage set source %q on a query it passed on", name, ev.Source)
	}
}

var household = []string{
	"nas.home. 300 IN A 192.168.1.50",
	"nas.home. 300 IN AAAA fd00::50",
	"printer.home. CNAME nas.home.",
	"tv.home. CNAME tv.example.com.",
	"NAS2.Home A 192.168.1.51",
	"51.1.168.192.in-addr.arpa. PTR given.home.",
	"home. TXT \"household\"",
}

func TestRecords_answeredAuthoritatively(t *testing.T) {
	s := newStage(t, Options{Records: household})
	resp := local(t, s, "NAS.home.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "192.168.1.50" {
		t.Errorf("answer %v", resp.Answer)
	}
	resp = local(t, s, "nas2.home.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 {
		t.Errorf("a mixed-case owner: answer %v", resp.Answer)
	}
	resp = local(t, s, "nas.home.", dns.TypeAAAA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.AAAA).AAAA.String() != "fd00::50" {
		t.Errorf("AAAA answer %v", resp.Answer)
	}
}

func TestRecords_missingTypeIsNODATA(t *testing.T) {
	s := newStage(t, Options{Records: household})
	resp := local(t, s, "nas.home.", dns.TypeMX, dns.RcodeSuccess)
	if len(resp.Answer) != 0 || len(resp.Ns) != 1 || resp.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("NODATA: answer %v, authority %v", resp.Answer, resp.Ns)
	}
}

func TestRecords_cnameFollowedInsideLocalData(t *testing.T) {
	s := newStage(t, Options{Records: household})
	resp := local(t, s, "printer.home.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 2 || resp.Answer[0].Header().Rrtype != dns.TypeCNAME || resp.Answer[1].Header().Rrtype != dns.TypeA {
		t.Errorf("answer %v, want the CNAME then nas.home's A", resp.Answer)
	}
	resp = local(t, s, "tv.home.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("a CNAME out of local data: answer %v, want the CNAME alone", resp.Answer)
	}
	resp = local(t, s, "printer.home.", dns.TypeCNAME, dns.RcodeSuccess)
	if len(resp.Answer) != 1 {
		t.Errorf("CNAME query: answer %v", resp.Answer)
	}
}

func TestRecords_cnameLoopEnds(t *testing.T) {
	s := newStage(t, Options{Records: []string{"a.home. CNAME b.home.", "b.home. CNAME a.home."}})
	resp := local(t, s, "a.home.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != maxChain {
		t.Errorf("%d records, want the chain cut at %d", len(resp.Answer), maxChain)
	}
}

func TestRecords_ptrDerivedUnlessGiven(t *testing.T) {
	s := newStage(t, Options{Records: household})
	resp := local(t, s, "50.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "nas.home." || resp.Answer[0].Header().Ttl != 300 {
		t.Errorf("derived PTR %v", resp.Answer)
	}
	rev, _ := dns.ReverseAddr("fd00::50")
	resp = local(t, s, rev, dns.TypePTR, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "nas.home." {
		t.Errorf("derived IPv6 PTR %v", resp.Answer)
	}
	resp = local(t, s, "51.1.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "given.home." {
		t.Errorf("a given PTR must win over the derived one: %v", resp.Answer)
	}
}

func TestNew_rejectsBadRecords(t *testing.T) {
	for _, rec := range []string{
		"nas.home. A 999.1.1.1",
		"nas.home. CH A 1.2.3.4",
		"$INCLUDE /etc/passwd",
		"a.home. A 1.2.3.4\nb.home. A 1.2.3.5",
		"home. SOA a. b. 1 2 3 4 5",
		"",
	} {
		if _, err := New(Options{Records: []string{rec}}); err == nil {
			t.Errorf("New(%q) accepted it", rec)
		}
	}
	if _, err := New(Options{Records: []string{"x.home. CNAME a.", "x.home. A 1.2.3.4"}}); err == nil {
		t.Error("a CNAME beside other records was accepted")
	}
}

// TestSpecial_neverPassedOn: the names docs/design.md#special-names keeps from the upstreams.
func TestSpecial_neverPassedOn(t *testing.T) {
	s := newStage(t, Options{BypassGuards: true})
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
	}{
		{"3.2.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"3.2.168.192.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"1.0.20.172.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"2.0.0.127.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"1.0.0.127.in-addr.arpa.", dns.TypeA, dns.RcodeSuccess},
		{"1.1.254.169.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{"1.0.64.100.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError},
		{mustRev("fd12:3456::1"), dns.TypePTR, dns.RcodeNameError},
		{mustRev("fe80::1"), dns.TypePTR, dns.RcodeNameError},
		{mustRev("::1"), dns.TypeA, dns.RcodeSuccess},
		{"168.192.in-addr.arpa.", dns.TypeA, dns.RcodeSuccess},
		{"nas.", dns.TypeA, dns.RcodeSuccess},
		{"NAS.", dns.TypeAAAA, dns.RcodeSuccess},
		{"wpad.", dns.TypeA, dns.RcodeSuccess},
		{"printer.local.", dns.TypeA, dns.RcodeNameError},
		{"x.home.arpa.", dns.TypeA, dns.RcodeNameError},
		{"foo.invalid.", dns.TypeA, dns.RcodeNameError},
		{"invalid.", dns.TypeA, dns.RcodeSuccess},
		{"hidden.onion.", dns.TypeA, dns.RcodeNameError},
		{"use-application-dns.net.", dns.TypeA, dns.RcodeNameError},
		{"_dns.resolver.arpa.", dns.TypeSVCB, dns.RcodeSuccess},
	} {
		resp := local(t, s, tc.name, tc.qtype, tc.rcode)
		if len(resp.Answer) != 0 || len(resp.Ns) != 1 || resp.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("%s: answer %v authority %v, want an empty answer and the zone's SOA", tc.name, resp.Answer, resp.Ns)
		}
	}
}

// Issue 29 item 6: the apex of a zone nxdns serves answers its own SOA and
// NS (RFC 6303 §3: "@ SOA", "@ NS @"), never NODATA beside the SOA it
// carries in the authority section; ANY gets both. localhost's apex and
// resolver.arpa's (DDR off) likewise.
func TestSpecial_apexAnswersItsSOAAndNS(t *testing.T) {
	s := newStage(t, Options{BypassGuards: true})
	for _, zone := range []string{"168.192.in-addr.arpa.", "10.in-addr.arpa.", "invalid.", "home.arpa.", mustRev("::1"), "localhost.", "resolver.arpa."} {
		for _, qt := range []uint16{dns.TypeSOA, dns.TypeNS, dns.TypeANY} {
			resp := local(t, s, zone, qt, dns.RcodeSuccess)
			want := map[uint16]int{dns.TypeSOA: 1, dns.TypeNS: 1, dns.TypeANY: 2}[qt]
			if len(resp.Answer) != want || len(resp.Ns) != 0 || !resp.Authoritative {
				t.Errorf("%s %s: answer %v authority %v aa %v, want %d apex records and no authority",
					zone, dns.TypeToString[qt], resp.Answer, resp.Ns, resp.Authoritative, want)
				continue
			}
			for _, rr := range resp.Answer {
				if rr.Header().Name != zone {
					t.Errorf("%s %s: owner %s", zone, dns.TypeToString[qt], rr.Header().Name)
				}
				if ns, ok := rr.(*dns.NS); ok && ns.Ns != zone {
					t.Errorf("%s NS %s, want the apex itself", zone, ns.Ns)
				}
			}
		}
		// Any other type at the apex: the name exists, NODATA with the SOA.
		resp := local(t, s, zone, dns.TypeTXT, dns.RcodeSuccess)
		if len(resp.Answer) != 0 || len(resp.Ns) != 1 || resp.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("%s TXT: answer %v authority %v, want NODATA with the SOA", zone, resp.Answer, resp.Ns)
		}
	}
}

// Issue 29 item 8: the loopback addresses' reverse names are localhost, as
// Unbound answers them.
func TestSpecial_loopbackReverseIsLocalhost(t *testing.T) {
	s := newStage(t, Options{})
	for _, name := range []string{"1.0.0.127.in-addr.arpa.", mustRev("::1")} {
		resp := local(t, s, name, dns.TypePTR, dns.RcodeSuccess)
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "localhost." || resp.Answer[0].Header().Name != name {
			t.Errorf("%s PTR: %v, want localhost.", name, resp.Answer)
		}
	}
}

// Issue 29 item 8: a single-label name is NODATA, not NXDOMAIN: "com."
// exists, and a downstream cache applying RFC 8020 would prune every name
// below an NXDOMAIN. The name stays off the upstreams all the same.
func TestSpecial_singleLabelIsNODATA(t *testing.T) {
	s := newStage(t, Options{})
	for _, name := range []string{"com.", "nas.", "wpad."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT} {
			resp := local(t, s, name, qt, dns.RcodeSuccess)
			if len(resp.Answer) != 0 || len(resp.Ns) != 1 || resp.Ns[0].Header().Rrtype != dns.TypeSOA {
				t.Errorf("%s %s: answer %v authority %v, want NODATA with an SOA", name, dns.TypeToString[qt], resp.Answer, resp.Ns)
			}
		}
	}
}

func mustRev(ip string) string {
	r, err := dns.ReverseAddr(ip)
	if err != nil {
		panic(err)
	}
	return r
}

func TestSpecial_localhostIsLoopback(t *testing.T) {
	s := newStage(t, Options{})
	resp := local(t, s, "localhost.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "127.0.0.1" {
		t.Errorf("localhost A: %v", resp.Answer)
	}
	resp = local(t, s, "app.localhost.", dns.TypeAAAA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.AAAA).AAAA.String() != "::1" {
		t.Errorf("app.localhost AAAA: %v", resp.Answer)
	}
	resp = local(t, s, "localhost.", dns.TypeMX, dns.RcodeSuccess)
	if len(resp.Answer) != 0 {
		t.Errorf("localhost MX: %v, want NODATA", resp.Answer)
	}
}

func TestSpecial_publicNamesPassOn(t *testing.T) {
	s := newStage(t, Options{Records: household, BypassGuards: true})
	for _, n := range []string{"example.com.", "x.burst.test.", "8.8.8.8.in-addr.arpa.", "in-addr.arpa.", mustRev("2001:4860::1"), "x.nas.home.", "."} {
		forwarded(t, s, n, dns.TypeA)
	}
	// A top-level domain's infrastructure types are not a LAN host's name.
	forwarded(t, s, "com.", dns.TypeDS)
	forwarded(t, s, "com.", dns.TypeNS)
}

func TestSpecial_forwardZoneCoversItsNames(t *testing.T) {
	covered := func(name string) bool {
		return dns.IsSubDomain("168.192.in-addr.arpa.", name) || dns.IsSubDomain("lan.", name)
	}
	s := newStage(t, Options{Covered: covered, BypassGuards: true})
	forwarded(t, s, "3.2.168.192.in-addr.arpa.", dns.TypePTR)
	forwarded(t, s, "lan.", dns.TypeSOA)
	local(t, s, "3.2.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeNameError)
	local(t, s, "nas.", dns.TypeA, dns.RcodeSuccess)
}

func TestSpecial_localRecordsCoverTheirNames(t *testing.T) {
	s := newStage(t, Options{Records: []string{"nas.home.arpa. A 192.168.1.50", "router. A 192.168.1.1"}})
	resp := local(t, s, "nas.home.arpa.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 {
		t.Errorf("nas.home.arpa: %v", resp.Answer)
	}
	resp = local(t, s, "router.", dns.TypeA, dns.RcodeSuccess)
	if len(resp.Answer) != 1 {
		t.Errorf("a single-label local record: %v", resp.Answer)
	}
	local(t, s, "other.home.arpa.", dns.TypeA, dns.RcodeNameError)
}

func TestForwardPrivate_passesThemOn(t *testing.T) {
	s := newStage(t, Options{ForwardPrivate: true, BypassGuards: true})
	for _, n := range []string{"3.2.1.10.in-addr.arpa.", "nas.", "printer.local.", "x.home.arpa."} {
		forwarded(t, s, n, dns.TypeA)
	}
	// The guards are their own switch.
	local(t, s, "use-application-dns.net.", dns.TypeA, dns.RcodeNameError)
}

func TestBypassGuards_offAndEncrypted(t *testing.T) {
	off := newStage(t, Options{BypassGuards: false})
	forwarded(t, off, "use-application-dns.net.", dns.TypeA)
	forwarded(t, off, "_dns.resolver.arpa.", dns.TypeSVCB)
	serving := newStage(t, Options{BypassGuards: true, Encrypted: func() bool { return true }})
	forwarded(t, serving, "_dns.resolver.arpa.", dns.TypeSVCB)
	local(t, serving, "use-application-dns.net.", dns.TypeA, dns.RcodeNameError)
}

func TestAnswer_keepsTheClientsQuestion(t *testing.T) {
	s := newStage(t, Options{Records: household})
	resp := local(t, s, "NaS.HoMe.", dns.TypeA, dns.RcodeSuccess)
	if resp.Question[0].Name != "NaS.HoMe." {
		t.Errorf("question %q, want the client's case", resp.Question[0].Name)
	}
}

func TestAnswer_otherClassPassesOnForRecords(t *testing.T) {
	s := newStage(t, Options{Records: household})
	u := &upstream{}
	m := new(dns.Msg).SetQuestion("version.bind.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	if _, err := s.Answer(context.Background(), &query.Request{Msg: m, Event: &query.Event{}}, u); err != nil || len(u.got) != 1 {
		t.Errorf("CHAOS version.bind: err %v, passed on %d", err, len(u.got))
	}
	if !strings.HasSuffix(household[0], "192.168.1.50") {
		t.Fatal("fixture changed")
	}
}

// specialZones merges the guard and private zones on the promise that no
// zone of one is at or below a zone of the other.
func TestSpecialZones_guardsAndPrivateZonesAreApart(t *testing.T) {
	for g := range guardZones {
		for p := range privateZones {
			if g == p || strings.HasSuffix(g, "."+p) || strings.HasSuffix(p, "."+g) {
				t.Errorf("guard zone %q and private zone %q overlap", g, p)
			}
		}
	}
}
