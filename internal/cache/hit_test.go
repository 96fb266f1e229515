package cache

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// hitStage is a Stage over a fresh cache of its own.
func hitStage(t *testing.T) *Stage {
	t.Helper()
	c := New(Options{Size: 10, MaxTTL: time.Hour})
	s := c.Stage()
	t.Cleanup(func() { s.Close(); c.Close() })
	return s
}

func ask(t *testing.T, s *Stage, name, ip string) *dns.Msg {
	t.Helper()
	q := new(dns.Msg).SetQuestion(name, dns.TypeA)
	next := query.HandlerFunc(func(_ context.Context, r *query.Request) (*dns.Msg, error) {
		m := new(dns.Msg).SetReply(r.Msg)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}}
		return m, nil
	})
	m, err := s.Answer(context.Background(), &query.Request{Msg: q, Deadline: time.Now().Add(time.Second), Event: &query.Event{}}, next)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Remember keeps a packed answer only for the entry that gave it: an answer
// the cache gave before the name was flushed and asked again never becomes
// the new entry's template (it would be sent for the whole new TTL).
func TestRemember_keepsOnlyTheAnswerOfTheEntryNowHeld(t *testing.T) {
	s := hitStage(t)
	const name = "nas.home."
	ask(t, s, name, "192.168.1.1")        // miss: stored
	old := ask(t, s, name, "192.168.1.1") // hit: the entry's answer
	wire, err := old.Pack()
	if err != nil {
		t.Fatal(err)
	}
	s.c.Flush(name)
	ask(t, s, name, "192.168.1.2") // the new entry
	s.Remember([]byte(name), dns.TypeA, dns.ClassINET, 0, old, wire)
	h, ok := s.Fresh([]byte(name), dns.TypeA, dns.ClassINET, 0, time.Now())
	if !ok {
		t.Fatal("the new entry is not fresh")
	}
	if h.Has(0) {
		t.Fatal("the flushed entry's answer became the new entry's template")
	}
	fresh := ask(t, s, name, "192.168.1.2")
	wire, _ = fresh.Pack()
	s.Remember([]byte(name), dns.TypeA, dns.ClassINET, 0, fresh, wire)
	h, _ = s.Fresh([]byte(name), dns.TypeA, dns.ClassINET, 0, time.Now())
	out, ok := h.Write(nil, 0, 7)
	if !ok {
		t.Fatal("the entry's own answer was not kept")
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.168.1.2" {
		t.Fatalf("template answer %v (%v)", m.Answer, err)
	}
}

// The fields a fast-path hit reads (Fresh, Has, Write, Age, Answer,
// CNAMEs) lie in the entry's first 64 bytes, ahead of the ones only the
// general path and the API read, so that a hit touches as few of the
// entry's cache lines as its placement allows.
func TestEntry_hitFieldsComeFirst(t *testing.T) {
	var e entry
	hot := []struct {
		name      string
		off, size uintptr
	}{
		{"name", unsafe.Offsetof(e.name), unsafe.Sizeof(e.name)},
		{"stored", unsafe.Offsetof(e.stored), unsafe.Sizeof(e.stored)},
		{"expires", unsafe.Offsetof(e.expires), unsafe.Sizeof(e.expires)},
		{"wires", unsafe.Offsetof(e.wires), unsafe.Sizeof(e.wires)},
		{"view", unsafe.Offsetof(e.view), unsafe.Sizeof(e.view)},
		{"cnames", unsafe.Offsetof(e.cnames), unsafe.Sizeof(e.cnames)},
		{"ttl", unsafe.Offsetof(e.ttl), unsafe.Sizeof(e.ttl)},
	}
	for _, f := range hot {
		if end := f.off + f.size; end > 64 {
			t.Errorf("entry.%s ends at byte %d, past the first 64", f.name, end)
		}
	}
}

// A hit's CNAMEs are the cached answer's CNAME targets in its order, as
// the answer spells them, and nil for an answer without one: what the
// filter checks of a hit in place of the message (query.Passer).
func TestHit_CNAMEsAreTheAnswersTargets(t *testing.T) {
	s := hitStage(t)
	chain := query.HandlerFunc(func(_ context.Context, r *query.Request) (*dns.Msg, error) {
		m := new(dns.Msg).SetReply(r.Msg)
		hdr := func(name string, t uint16) dns.RR_Header {
			return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: 60}
		}
		m.Answer = []dns.RR{
			&dns.CNAME{Hdr: hdr("www.shop.example.", dns.TypeCNAME), Target: "shop.CDN.example."},
			&dns.CNAME{Hdr: hdr("shop.cdn.example.", dns.TypeCNAME), Target: "edge.tracker.example."},
			&dns.A{Hdr: hdr("edge.tracker.example.", dns.TypeA), A: net.ParseIP("192.0.2.7")},
		}
		return m, nil
	})
	q := new(dns.Msg).SetQuestion("www.shop.example.", dns.TypeA)
	if _, err := s.Answer(context.Background(), &query.Request{Msg: q, Deadline: time.Now().Add(time.Second), Event: &query.Event{}}, chain); err != nil {
		t.Fatal(err)
	}
	h, ok := s.Fresh([]byte("www.shop.example."), dns.TypeA, dns.ClassINET, 0, time.Now())
	if !ok {
		t.Fatal("not cached")
	}
	if got := h.CNAMEs(); !slices.Equal(got, []string{"shop.CDN.example.", "edge.tracker.example."}) {
		t.Errorf("CNAMEs %q", got)
	}
	ask(t, s, "nas.home.", "192.168.1.1")
	if h, ok = s.Fresh([]byte("nas.home."), dns.TypeA, dns.ClassINET, 0, time.Now()); !ok || h.CNAMEs() != nil {
		t.Errorf("an answer without a CNAME: %q (cached %v)", h.CNAMEs(), ok)
	}
}
