package wireform

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	return m
}

func TestParseQuery_readsWhatMiekgReads(t *testing.T) {
	withEDNS := query("host1.example.", dns.TypeAAAA)
	withEDNS.SetEdns0(1232, true)
	withEDNS.CheckingDisabled = true
	withEDNS.AuthenticatedData = true
	withCookie := query("_dmarc.example-site.org.", dns.TypeTXT)
	withCookie.SetEdns0(4096, false)
	withCookie.IsEdns0().Option = append(withCookie.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
	noRD := query("a.b.c.", dns.TypeMX)
	noRD.RecursionDesired = false
	for _, m := range []*dns.Msg{query("www.example.com.", dns.TypeA), query(".", dns.TypeNS), withEDNS, withCookie, noRD} {
		var buf [MaxName]byte
		q, ok := ParseQuery(pack(t, m), &buf)
		if !ok {
			t.Fatalf("%v: not read as ordinary", m.Question[0])
		}
		checkAgrees(t, m, q)
	}
}

// checkAgrees fails unless q says what miekg/dns made of the same query.
func checkAgrees(t *testing.T, m *dns.Msg, q Query) {
	t.Helper()
	want := m.Question[0]
	if string(q.Name) != strings.ToLower(want.Name) || q.Qtype != want.Qtype || q.Qclass != want.Qclass || q.ID != m.Id {
		t.Fatalf("read %q %d %d id %d, miekg %q %d %d id %d", q.Name, q.Qtype, q.Qclass, q.ID, want.Name, want.Qtype, want.Qclass, m.Id)
	}
	var shape uint8
	if m.RecursionDesired {
		shape |= ShapeRD
	}
	if m.CheckingDisabled {
		shape |= ShapeCD
	}
	if m.AuthenticatedData {
		shape |= ShapeAD
	}
	if o := m.IsEdns0(); o != nil {
		shape |= ShapeEDNS
		if o.Do() {
			shape |= ShapeDO
		}
		if q.UDPSize != o.UDPSize() {
			t.Fatalf("UDP size %d, miekg %d", q.UDPSize, o.UDPSize())
		}
	}
	if q.Shape != shape {
		t.Fatalf("shape %05b, miekg's flags give %05b", q.Shape, shape)
	}
}

func TestParseQuery_leavesTheUnusualToTheGeneralPath(t *testing.T) {
	upper := query("WWW.example.com.", dns.TypeA)
	escaped := query(`a\.b.example.`, dns.TypeA)
	response := query("a.example.", dns.TypeA)
	response.Response = true
	notify := query("a.example.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	two := query("a.example.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	version1 := query("a.example.", dns.TypeA)
	version1.SetEdns0(1232, false)
	version1.IsEdns0().SetVersion(1)
	subnet := query("a.example.", dns.TypeA)
	subnet.SetEdns0(1232, false)
	subnet.IsEdns0().Option = append(subnet.IsEdns0().Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: []byte{10, 0, 0, 0}})
	withAnswer := query("a.example.", dns.TypeA)
	withAnswer.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: []byte{1, 2, 3, 4}}}
	cases := map[string][]byte{
		"upper case":      pack(t, upper),
		"escaped label":   pack(t, escaped),
		"response":        pack(t, response),
		"opcode NOTIFY":   pack(t, notify),
		"two questions":   pack(t, two),
		"EDNS version 1":  pack(t, version1),
		"client subnet":   pack(t, subnet),
		"answer section":  pack(t, withAnswer),
		"trailing byte":   append(pack(t, query("a.example.", dns.TypeA)), 0),
		"truncated":       pack(t, query("a.example.", dns.TypeA))[:20],
		"header only":     pack(t, query("a.example.", dns.TypeA))[:12],
		"pointer in name": append(pack(t, query("a.example.", dns.TypeA))[:12], 0xC0, 12, 0, 1, 0, 1),
	}
	for what, wire := range cases {
		var buf [MaxName]byte
		if _, ok := ParseQuery(wire, &buf); ok {
			t.Errorf("%s: read as an ordinary query", what)
		}
	}
}

// FuzzParseQuery: whatever ParseQuery accepts, miekg/dns reads the same way.
func FuzzParseQuery(f *testing.F) {
	e := query("host.example.", dns.TypeA)
	e.SetEdns0(1232, true)
	ad := query("ad.example.", dns.TypeA)
	ad.AuthenticatedData = true
	for _, m := range []*dns.Msg{query("www.example.com.", dns.TypeA), e, ad} {
		f.Add(pack(f, m))
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		var buf [MaxName]byte
		q, ok := ParseQuery(wire, &buf)
		if !ok {
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(wire); err != nil {
			t.Fatalf("accepted what miekg refuses: %v", err)
		}
		if len(m.Question) != 1 {
			t.Fatalf("accepted %d questions", len(m.Question))
		}
		checkAgrees(t, m, q)
	})
}

func answer(t testing.TB, ttl uint32) []byte {
	m := query("www.example.com.", dns.TypeA)
	r := new(dns.Msg).SetReply(m)
	r.Answer = []dns.RR{
		&dns.CNAME{Hdr: dns.RR_Header{Name: "www.example.com.", Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: ttl}, Target: "edge.example.net."},
		&dns.A{Hdr: dns.RR_Header{Name: "edge.example.net.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl + 100}, A: []byte{192, 0, 2, 1}},
	}
	r.SetEdns0(1232, true)
	r.Compress = true
	return pack(t, r)
}

func TestTemplate_countsDownLikeTheRecords(t *testing.T) {
	tpl, ok := NewTemplate(answer(t, 300))
	if !ok {
		t.Fatal("no template")
	}
	out := tpl.Write(nil, 0xBEEF, 60)
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		t.Fatal(err)
	}
	if m.Id != 0xBEEF {
		t.Fatalf("id %x", m.Id)
	}
	if got := []uint32{m.Answer[0].Header().Ttl, m.Answer[1].Header().Ttl}; got[0] != 240 || got[1] != 340 {
		t.Fatalf("TTLs %v after 60 s, want [240 340]", got)
	}
	if o := m.IsEdns0(); o == nil || !o.Do() || o.UDPSize() != 1232 {
		t.Fatalf("the OPT record's flags changed: %v", o)
	}
	if out := tpl.Write(nil, 1, 990); mustUnpack(t, out).Answer[0].Header().Ttl != 0 {
		t.Fatal("a TTL went below zero or wrapped")
	}
	if out := tpl.Write(nil, 1, -5); mustUnpack(t, out).Answer[0].Header().Ttl != 300 {
		t.Fatal("a clock gone backwards raised the TTL")
	}
}

func mustUnpack(t *testing.T, b []byte) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewTemplate_refusesWhatItCannotCountDown(t *testing.T) {
	if _, ok := NewTemplate(answer(t, 0)); ok {
		t.Error("a template with a TTL already at 0")
	}
	full := answer(t, 60)
	for _, cut := range []int{len(full) - 1, 30, 11} {
		if _, ok := NewTemplate(full[:cut]); ok {
			t.Errorf("a template from %d of %d bytes", cut, len(full))
		}
	}
	if _, ok := NewTemplate(append(full, 0)); ok {
		t.Error("a template with a trailing byte")
	}
}

func BenchmarkParseQuery(b *testing.B) {
	m := query("host42.cache.test.", dns.TypeA)
	m.SetEdns0(1232, false)
	wire := pack(b, m)
	var buf [MaxName]byte
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ParseQuery(wire, &buf); !ok {
			b.Fatal("not ordinary")
		}
	}
}

func BenchmarkTemplateWrite(b *testing.B) {
	tpl, _ := NewTemplate(answer(b, 300))
	dst := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		dst = tpl.Write(dst, 7, 3)
	}
}
