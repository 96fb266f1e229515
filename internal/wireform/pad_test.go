package wireform

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// Pad makes a message with an OPT record a multiple of the block, with one
// Padding option of zeros appended, and leaves everything else as it was.
func TestPad_fillsTheBlockWithOnePaddingOption(t *testing.T) {
	q := query("www.example.com.", dns.TypeA)
	q.SetEdns0(1232, true)
	withEDE := query("a.example.", dns.TypeA)
	r := new(dns.Msg).SetReply(withEDE)
	r.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{strings.Repeat("t", 200)}}}
	r.SetEdns0(1232, false)
	r.IsEdns0().Option = append(r.IsEdns0().Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: "why"})
	r.Compress = true
	for _, c := range []struct {
		what  string
		m     *dns.Msg
		block int
	}{
		{"query", q, QueryBlock},
		{"response with an EDE", r, ResponseBlock},
		{"response over a block", r, 128},
	} {
		wire := pack(t, c.m)
		out, ok := Pad(append([]byte(nil), wire...), c.block, 0xFFFF)
		if !ok || len(out)%c.block != 0 || len(out) < len(wire)+4 || len(out) >= len(wire)+4+c.block {
			t.Fatalf("%s: %d bytes padded to %d (ok %v), want the next multiple of %d", c.what, len(wire), len(out), ok, c.block)
		}
		m := mustUnpack(t, out)
		o := m.IsEdns0()
		last, isPad := o.Option[len(o.Option)-1].(*dns.EDNS0_PADDING)
		if !isPad || strings.Trim(string(last.Padding), "\x00") != "" {
			t.Fatalf("%s: last option %v, want zeros of padding", c.what, o.Option[len(o.Option)-1])
		}
		o.Option = o.Option[:len(o.Option)-1]
		want := mustUnpack(t, wire)
		if m.String() != want.String() {
			t.Fatalf("%s: padding changed the message:\n%v\nwas\n%v", c.what, m, want)
		}
	}
}

// Pad leaves alone a message it cannot pad: no OPT record last, or no room.
func TestPad_refusesWhatItCannotPad(t *testing.T) {
	plain := pack(t, query("a.example.", dns.TypeA))
	if out, ok := Pad(plain, QueryBlock, 0xFFFF); ok || len(out) != len(plain) {
		t.Error("padded a message without an OPT record")
	}
	q := query("a.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	wire := pack(t, q)
	if _, ok := Pad(wire, QueryBlock, len(wire)+3); ok {
		t.Error("padded past the limit")
	}
	out, ok := Pad(wire, QueryBlock, len(wire)+10)
	if !ok || len(out) != len(wire)+10 {
		t.Errorf("padded to %d bytes (ok %v) within %d, want exactly that", len(out), ok, len(wire)+10)
	}
	if _, ok := Pad(wire[:len(wire)-1], QueryBlock, 0xFFFF); ok {
		t.Error("padded a message cut short")
	}
}

// PaddedLen is the length Pad gives, for every length mod the block and
// limits below, at and above it: a caller sizing a buffer by it never
// makes Pad grow the buffer.
func TestPaddedLen_isPadsLength(t *testing.T) {
	for extra := -1; extra < QueryBlock; extra++ { // an option of extra bytes of data, none for -1
		q := query("a.example.", dns.TypeA)
		q.SetEdns0(1232, false)
		if extra >= 0 {
			q.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_LOCAL{Code: 65001, Data: make([]byte, extra)}}
		}
		wire := pack(t, q)
		for _, limit := range []int{len(wire) + 3, len(wire) + 4, len(wire) + 60, 0xFFFF} {
			out, ok := Pad(slices.Clip(append([]byte(nil), wire...)), QueryBlock, limit)
			want := PaddedLen(len(wire), QueryBlock, limit)
			if len(out) != want || ok != (want != len(wire)) {
				t.Fatalf("%d bytes within %d padded to %d (ok %v); PaddedLen says %d", len(wire), limit, len(out), ok, want)
			}
		}
	}
}

// FuzzPad: whatever message miekg/dns reads and Pad pads, miekg/dns still
// reads, ending in a Padding option, a multiple of the block long or limit.
func FuzzPad(f *testing.F) {
	q := query("www.example.com.", dns.TypeA)
	q.SetEdns0(1232, true)
	f.Add(pack(f, q), uint16(300))
	f.Add(answer(f, 60), uint16(0xFFFF))
	f.Fuzz(func(t *testing.T, wire []byte, limit uint16) {
		if new(dns.Msg).Unpack(wire) != nil {
			return
		}
		out, ok := Pad(append([]byte(nil), wire...), ResponseBlock, int(limit))
		if !ok {
			if !bytes.Equal(out, wire) {
				t.Fatal("a message Pad refused was changed")
			}
			return
		}
		m := new(dns.Msg)
		if err := m.Unpack(out); err != nil {
			t.Fatalf("padded message does not decode: %v", err)
		}
		o := m.IsEdns0()
		if o == nil || len(o.Option) == 0 || o.Option[len(o.Option)-1].Option() != dns.EDNS0PADDING {
			t.Fatalf("no Padding option last: %v", o)
		}
		if len(out) > int(limit) || len(out)%ResponseBlock != 0 && len(out) != int(limit) {
			t.Fatalf("%d bytes padded to %d within %d", len(wire), len(out), limit)
		}
		if n := PaddedLen(len(wire), ResponseBlock, int(limit)); len(out) != n {
			t.Fatalf("%d bytes padded to %d within %d; PaddedLen says %d", len(wire), len(out), limit, n)
		}
	})
}
