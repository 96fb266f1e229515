package server

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestServe_answersOverUDPAndTCP(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	for _, tc := range []struct{ network, addr string }{{"udp", udpAddr(s)}, {"tcp", tcpAddr(s)}} {
		t.Run(tc.network, func(t *testing.T) {
			q := newQuery("Host.Example.", dns.TypeA)
			resp := exchange(t, tc.network, tc.addr, q) // miekg checks the ID
			if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
				t.Fatalf("answer: rcode %s, %d records, want NOERROR and 1", dns.RcodeToString[resp.Rcode], len(resp.Answer))
			}
			if a := resp.Answer[0].(*dns.A).A.String(); a != "192.0.2.1" {
				t.Errorf("A = %s, want 192.0.2.1", a)
			}
			if resp.Question[0].Name != "Host.Example." {
				t.Errorf("question %q, want the client's own spelling", resp.Question[0].Name)
			}
			if resp.IsEdns0() != nil {
				t.Error("answer carries an OPT record, but the client sent none (RFC 6891 §7)")
			}
		})
	}
	if n := count(s.Snapshot(), "pool", "NOERROR"); n != 2 {
		t.Errorf("pool/NOERROR count = %d, want 2", n)
	}
}

// The resolver gets nxdns's own query: a fresh ID, RD set, nxdns's EDNS
// buffer, the client's DO bit, and none of the client's options.
func TestServe_buildsItsOwnUpstreamQuery(t *testing.T) {
	seen := make(chan *dns.Msg, 1)
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		seen <- q.Copy()
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(r))
	q := newQuery("a.example.", dns.TypeA)
	q.RecursionDesired = false
	q.SetEdns0(4096, true)
	q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	resp := exchange(t, "udp", udpAddr(s), q)

	up := <-seen
	opt := up.IsEdns0()
	switch {
	case !up.RecursionDesired:
		t.Error("upstream query has RD clear; nxdns recurses for its clients")
	case opt == nil:
		t.Fatal("upstream query has no OPT record")
	case opt.UDPSize() != upstreamUDPSize:
		t.Errorf("upstream EDNS size %d, want nxdns's own %d", opt.UDPSize(), upstreamUDPSize)
	case !opt.Do():
		t.Error("upstream query lost the client's DO bit")
	case len(opt.Option) != 0:
		t.Errorf("upstream query forwards client options %v", opt.Option)
	}
	ropt := resp.IsEdns0()
	if ropt == nil || !ropt.Do() || ropt.UDPSize() != upstreamUDPSize {
		t.Errorf("answer OPT = %v, want one with DO and size %d", ropt, upstreamUDPSize)
	}
	if resp.RecursionDesired {
		t.Error("answer RD set; it echoes the client's (clear)")
	}
}

func TestHandler_rejectsBadQueries(t *testing.T) {
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		t.Errorf("resolver called for %v", q.Question)
		return nil, "", errors.New("unreachable")
	})
	s := startServer(t, state(r))

	garbage := []byte{0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x07}
	twoQuestions := newQuery("a.example.", dns.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, dns.Question{Name: "b.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	twoOPT := newQuery("a.example.", dns.TypeA).SetEdns0(1232, false)
	twoOPT.Extra = append(twoOPT.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}})
	update := new(dns.Msg).SetUpdate("example.")
	notify := new(dns.Msg).SetNotify("example.")
	badVers := newQuery("a.example.", dns.TypeA).SetEdns0(1232, false)
	badVers.IsEdns0().SetVersion(1)
	axfr := newQuery("example.", dns.TypeAXFR)

	for _, tc := range []struct {
		name   string
		wire   []byte
		id     uint16
		rcode  int
		opcode int
	}{
		{"body garbage → FORMERR", garbage, 0x1234, dns.RcodeFormatError, dns.OpcodeQuery},
		{"QDCOUNT 2 → FORMERR", mustPack(t, twoQuestions), twoQuestions.Id, dns.RcodeFormatError, dns.OpcodeQuery},
		{"two OPT records → FORMERR", mustPack(t, twoOPT), twoOPT.Id, dns.RcodeFormatError, dns.OpcodeQuery},
		{"UPDATE → NOTIMP", mustPack(t, update), update.Id, dns.RcodeNotImplemented, dns.OpcodeUpdate},
		{"NOTIFY → NOTIMP", mustPack(t, notify), notify.Id, dns.RcodeNotImplemented, dns.OpcodeNotify},
		{"EDNS version 1 → BADVERS", mustPack(t, badVers), badVers.Id, dns.RcodeBadVers, dns.OpcodeQuery},
		{"AXFR → NOTIMP", mustPack(t, axfr), axfr.Id, dns.RcodeNotImplemented, dns.OpcodeQuery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialUDP(t, udpAddr(s))
			if _, err := c.Write(tc.wire); err != nil {
				t.Fatal(err)
			}
			resp := readUDPMsg(t, c)
			if resp.Id != tc.id || resp.Rcode != tc.rcode || resp.Opcode != tc.opcode || !resp.Response {
				t.Errorf("answer id %#x rcode %s opcode %s, want id %#x rcode %s opcode %s",
					resp.Id, dns.RcodeToString[resp.Rcode], dns.OpcodeToString[resp.Opcode],
					tc.id, dns.RcodeToString[tc.rcode], dns.OpcodeToString[tc.opcode])
			}
		})
	}
	if n := count(s.Snapshot(), sourceServer, "FORMERR"); n != 3 {
		t.Errorf("server/FORMERR count = %d, want 3", n)
	}
}

func TestHandler_refusesClientOutsideAllow(t *testing.T) {
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		t.Errorf("resolver called for a refused client: %v", q.Question)
		return answerA("192.0.2.1")(ctx, q)
	})
	st := state(r)
	st.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	s := startServer(t, st)
	resp := exchange(t, "udp", udpAddr(s), newQuery("a.example.", dns.TypeA))
	if resp.Rcode != dns.RcodeRefused || len(resp.Answer) != 0 {
		t.Errorf("rcode %s with %d answers, want REFUSED and none", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	snap := s.Snapshot()
	if snap.Refused != 1 || count(snap, sourceRefused, "REFUSED") != 1 {
		t.Errorf("refused = %d, refused/REFUSED = %d, want 1 and 1", snap.Refused, count(snap, sourceRefused, "REFUSED"))
	}
}

// A datagram without a whole header, or with QR set, is dropped unanswered
// and counted; the valid query after it is answered first.
func TestUDP_dropsMalformedDatagrams(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	c := dialUDP(t, udpAddr(s))
	response := new(dns.Msg).SetReply(newQuery("x.example.", dns.TypeA))
	valid := newQuery("a.example.", dns.TypeA)
	for _, wire := range [][]byte{{0x12, 0x34, 0x01}, mustPack(t, response), mustPack(t, valid)} {
		if _, err := c.Write(wire); err != nil {
			t.Fatal(err)
		}
	}
	// The reader handles datagrams in order and drops the first two before
	// it reads the third, so an answer to either would arrive first.
	if resp := readUDPMsg(t, c); resp.Id != valid.Id {
		t.Fatalf("first datagram back has ID %#x, want the valid query's %#x", resp.Id, valid.Id)
	}
	if n := s.Snapshot().Malformed; n != 2 {
		t.Errorf("malformed = %d, want 2", n)
	}
}

// bigAnswer answers with 15 TXT records of 250 bytes: about 4 KB.
func bigAnswer(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	var rrs []dns.RR
	for i := range 15 {
		rrs = append(rrs, &dns.TXT{
			Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{strings.Repeat(string(rune('a'+i)), 250)},
		})
	}
	return reply(q, rrs...), testUpstream, nil
}

func TestServe_sizesAnswerToClient(t *testing.T) {
	s := startServer(t, state(resolverFunc(bigAnswer)))
	for _, tc := range []struct {
		name    string
		edns    uint16 // 0: no EDNS
		maxSize int
	}{
		{"no EDNS: 512", 0, 512},
		{"EDNS 4096 clamped to 1232", 4096, maxUDPAnswer},
		{"EDNS 100 raised to 512", 100, 512},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := newQuery("big.example.", dns.TypeTXT)
			if tc.edns != 0 {
				q.SetEdns0(tc.edns, false)
			}
			c := dialUDP(t, udpAddr(s))
			if _, err := c.Write(mustPack(t, q)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 65535)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := c.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			resp := new(dns.Msg)
			if err := resp.Unpack(buf[:n]); err != nil {
				t.Fatal(err)
			}
			if n > tc.maxSize || !resp.Truncated || len(resp.Answer) >= 15 {
				t.Errorf("UDP answer %d bytes, TC %v, %d records; want ≤ %d bytes, TC, fewer than 15",
					n, resp.Truncated, len(resp.Answer), tc.maxSize)
			}
			if (tc.edns != 0) != (resp.IsEdns0() != nil) {
				t.Errorf("answer OPT %v for a client with EDNS %d", resp.IsEdns0(), tc.edns)
			}
		})
	}
	t.Run("TCP whole", func(t *testing.T) {
		resp := exchange(t, "tcp", tcpAddr(s), newQuery("big.example.", dns.TypeTXT))
		if resp.Truncated || len(resp.Answer) != 15 || resp.Len() < 3800 {
			t.Errorf("TCP answer TC %v, %d records, %d bytes; want the whole ~4 KB answer", resp.Truncated, len(resp.Answer), resp.Len())
		}
	})
}

func TestUDP_dropsOverInFlightCap(t *testing.T) {
	const extra = 10
	entered := make(chan struct{}, maxUDPInFlight+extra)
	release := make(chan struct{})
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(r))
	c := dialUDP(t, udpAddr(s))
	send := func(id int) {
		m := newQuery("flood.example.", dns.TypeA)
		m.Id = uint16(id)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	// In lockstep: a thousand datagrams sent at once overflow the socket's
	// receive queue, and the kernel's drops are not the cap's.
	for i := range maxUDPInFlight {
		send(i + 1)
		<-entered
	}
	for i := range extra {
		send(1000 + i)
	}
	waitFor(t, "the extra datagrams to be dropped", func() bool { return s.Snapshot().UDPDropped == extra })
	if snap := s.Snapshot(); snap.UDPInFlight != maxUDPInFlight || len(entered) != 0 {
		t.Errorf("in flight %d, %d more reached the resolver; want %d and none", snap.UDPInFlight, len(entered), maxUDPInFlight)
	}
	// Answers in lockstep too, for the client socket's receive queue.
	for range maxUDPInFlight {
		release <- struct{}{}
		if resp := readUDPMsg(t, c); resp.Id > maxUDPInFlight {
			t.Errorf("dropped query %d was answered", resp.Id)
		}
	}
}
