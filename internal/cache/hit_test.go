package cache

import (
	"context"
	"net"
	"testing"
	"time"

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
