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
	return askWire(t, s, name, ip, nil)
}

// askWire asks s for name's A record, answered by next with ip, the server's
// packing handed down as wire (nil for none).
func askWire(t *testing.T, s *Stage, name, ip string, wire query.WireForm) *dns.Msg {
	t.Helper()
	q := new(dns.Msg).SetQuestion(name, dns.TypeA)
	next := query.HandlerFunc(func(_ context.Context, r *query.Request) (*dns.Msg, error) {
		m := new(dns.Msg).SetReply(r.Msg)
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}}
		return m, nil
	})
	m, err := s.Answer(context.Background(), &query.Request{Msg: q, Deadline: time.Now().Add(time.Second), Event: &query.Event{}, Wire: wire}, next)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// plainWire packs an answer as it is, for shape 0.
type plainWire struct{}

func (plainWire) Shape() (uint8, bool) { return 0, true }
func (plainWire) Pack(m *dns.Msg) ([]byte, bool) {
	out, err := m.Pack()
	return out, err == nil
}

// answerWire asks s's wire shortcut for name's A record in shape 0.
func answerWire(s *Stage, name string) (*dns.Msg, *query.Event, bool) {
	ev := &query.Event{Time: time.Now()}
	out, ok := s.AnswerWire(nil, query.WireQuery{Name: []byte(name), Qtype: dns.TypeA, Qclass: dns.ClassINET, ID: 7}, ev, nil)
	if !ok {
		return nil, ev, false
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		return nil, ev, false
	}
	return m, ev, true
}

// The stage keeps the server's packing of an entry's answer the first time
// it answers a query of that shape from the entry, so the wire shortcut
// answers the next one; a miss keeps none (most entries are never asked
// again), an entry stored again after a flush answers with its own answer,
// and a hit with no packing (not plain UDP) keeps none.
func TestAnswerWire_templateKeptByTheFirstHitOfItsShape(t *testing.T) {
	s := hitStage(t)
	const name = "nas.home."
	askWire(t, s, name, "192.168.1.1", plainWire{}) // miss: stored
	if _, _, ok := answerWire(s, name); ok {
		t.Fatal("a miss's answer was kept as a template")
	}
	askWire(t, s, name, "192.168.1.9", plainWire{}) // hit: the entry's answer is packed
	m, ev, ok := answerWire(s, name)
	if !ok || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.168.1.1" || m.Id != 7 {
		t.Fatalf("wire answer %v (answered %v)", m, ok)
	}
	if ev.Name != name || ev.Cache != query.CacheHit || ev.Source != query.SourceCache || ev.Reply == nil {
		t.Errorf("event %+v", ev)
	}
	s.c.Flush(name)
	if _, _, ok := answerWire(s, name); ok {
		t.Fatal("a flushed entry answered from the wire")
	}
	ask(t, s, name, "192.168.1.2") // miss: the new entry
	ask(t, s, name, "192.168.1.2") // hit without a packing
	if _, _, ok := answerWire(s, name); ok {
		t.Fatal("a hit without a packing left a template")
	}
	askWire(t, s, name, "192.168.1.9", plainWire{})
	m, _, ok = answerWire(s, name)
	if !ok || m.Answer[0].(*dns.A).A.String() != "192.168.1.2" {
		t.Fatalf("wire answer after the flush %v (answered %v)", m, ok)
	}
}

// The fields a wire hit reads (freshHit, template, age, AnswerWire,
// cnames) lie in the entry's first 64 bytes, ahead of the ones only the
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
	h, ok := s.freshHit([]byte("www.shop.example."), "", dns.TypeA, dns.ClassINET, 0, time.Now())
	if !ok {
		t.Fatal("not cached")
	}
	if got := h.cnames(); !slices.Equal(got, []string{"shop.CDN.example.", "edge.tracker.example."}) {
		t.Errorf("CNAMEs %q", got)
	}
	ask(t, s, "nas.home.", "192.168.1.1")
	if h, ok = s.freshHit([]byte("nas.home."), "", dns.TypeA, dns.ClassINET, 0, time.Now()); !ok || h.cnames() != nil {
		t.Errorf("an answer without a CNAME: %q (cached %v)", h.cnames(), ok)
	}
}
