package upstream

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"
)

// TestValidate is the table of docs/design.md#response-validation: a response must be a response to this query.
func TestValidate(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("www.Example.org.", dns.TypeA)
	q.Id = 4242
	answer := func(edit func(*dns.Msg)) *dns.Msg {
		r := new(dns.Msg)
		r.SetReply(q)
		if edit != nil {
			edit(r)
		}
		return r
	}
	tests := []struct {
		name string
		resp *dns.Msg
		want Kind // 0: valid
	}{
		{"reply", answer(nil), 0},
		{"name case differs", answer(func(r *dns.Msg) { r.Question[0].Name = "WWW.EXAMPLE.ORG." }), 0},
		{"formerr without question", answer(func(r *dns.Msg) { r.Rcode = dns.RcodeFormatError; r.Question = nil }), 0},
		{"nil", nil, KindBadResponse},
		{"qr not set", answer(func(r *dns.Msg) { r.Response = false }), KindBadResponse},
		{"wrong id", answer(func(r *dns.Msg) { r.Id++ }), KindResponseMismatch},
		{"other name", answer(func(r *dns.Msg) { r.Question[0].Name = "www.example.net." }), KindResponseMismatch},
		{"other type", answer(func(r *dns.Msg) { r.Question[0].Qtype = dns.TypeAAAA }), KindResponseMismatch},
		{"other class", answer(func(r *dns.Msg) { r.Question[0].Qclass = dns.ClassCHAOS }), KindResponseMismatch},
		{"no question, not formerr", answer(func(r *dns.Msg) { r.Question = nil }), KindResponseMismatch},
		{"extra question", answer(func(r *dns.Msg) { r.Question = append(r.Question, r.Question[0]) }), KindResponseMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(q, tt.resp)
			if tt.want == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want %v", tt.want)
			}
			if got := Classify(err); got != tt.want {
				t.Errorf("kind = %v, want %v", got, tt.want)
			}
			if Classify(err).Group() != PeerFault {
				t.Errorf("a bad response must be a peer fault")
			}
		})
	}
}

// TestValidateStream: TC=1 means nothing over a stream (docs/design.md#response-validation), so such an
// answer is a bad response there, while Validate alone (UDP) lets it through
// for the TCP retry.
func TestValidateStream(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("example.org.", dns.TypeTXT)
	tc := new(dns.Msg)
	tc.SetReply(q)
	tc.Truncated = true
	if err := ValidateStream(q, tc); Classify(err) != KindBadResponse {
		t.Errorf("ValidateStream(TC=1) kind = %v, want bad response", Classify(err))
	}
	if err := Validate(q, tc); err != nil {
		t.Errorf("Validate(TC=1) = %v, want nil: over UDP TC asks for the TCP retry", err)
	}
	tc.Truncated = false
	if err := ValidateStream(q, tc); err != nil {
		t.Errorf("ValidateStream(TC=0) = %v, want nil", err)
	}
	tc.Id++
	if err := ValidateStream(q, tc); Classify(err) != KindResponseMismatch {
		t.Errorf("ValidateStream(wrong id) kind = %v, want mismatch", Classify(err))
	}
}

func TestUnpack(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("example.org.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(q)
	wire, err := r.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := Unpack(wire); err != nil || m.Id != q.Id {
		t.Fatalf("Unpack(valid) = %v, %v", m, err)
	}
	if _, err := Unpack(wire[:5]); Classify(err) != KindBadResponse {
		t.Errorf("Unpack(short) kind = %v, want bad response", Classify(err))
	}
	big := bytes.Repeat([]byte{0}, MaxResponseSize+1)
	if _, err := Unpack(big); Classify(err) != KindResponseTooLarge {
		t.Errorf("Unpack(too large) kind = %v, want response too large", Classify(err))
	}
}

// A TTL with the top bit set reads as 0 (RFC 2181 §8) in every section, and
// the OPT record's flags, which sit in its TTL field, are left alone.
func TestUnpack_topBitTTLIsZero(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("example.org.", dns.TypeA)
	r := new(dns.Msg)
	r.SetReply(q)
	hdr := func(sec string) dns.RR_Header {
		return dns.RR_Header{Name: sec + ".example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1 << 31}
	}
	r.Answer = []dns.RR{&dns.A{Hdr: hdr("answer"), A: []byte{192, 0, 2, 1}}, &dns.A{Hdr: dns.RR_Header{Name: "kept.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1<<31 - 1}, A: []byte{192, 0, 2, 2}}}
	r.Ns = []dns.RR{&dns.A{Hdr: hdr("authority"), A: []byte{192, 0, 2, 3}}}
	r.Extra = []dns.RR{&dns.A{Hdr: hdr("additional"), A: []byte{192, 0, 2, 4}}}
	r.SetEdns0(1232, true)
	r.Rcode = 0x800 // extended rcode 0x80: the top bit of the OPT's TTL field
	wire, err := r.Pack()
	if err != nil {
		t.Fatal(err)
	}
	m, err := Unpack(wire)
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range []dns.RR{m.Answer[0], m.Ns[0], m.Extra[0]} {
		if rr.Header().Ttl != 0 {
			t.Errorf("%s: TTL %d, want 0", rr.Header().Name, rr.Header().Ttl)
		}
	}
	if ttl := m.Answer[1].Header().Ttl; ttl != 1<<31-1 {
		t.Errorf("the largest valid TTL became %d", ttl)
	}
	if o := m.IsEdns0(); o == nil || !o.Do() || o.Hdr.Ttl>>31 != 1 || m.Rcode != 0x800 {
		t.Errorf("the OPT record's flags changed: %v", o)
	}
}
