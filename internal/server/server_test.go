package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
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
	// A query is recorded once its answer was written (undelivered ones are
	// counted as such), so the count may trail the answer by a moment.
	waitFor(t, "both queries to be counted", func() bool { return count(s.Snapshot(), "pool", "NOERROR") == 2 })
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
	inClass := func(name string, qtype, class uint16) *dns.Msg {
		m := newQuery(name, qtype)
		m.Question[0].Qclass = class
		return m
	}
	versionBind := inClass("version.bind.", dns.TypeTXT, dns.ClassCHAOS)
	classNone := inClass("example.", dns.TypeA, dns.ClassNONE)
	hesiod := inClass("example.", dns.TypeTXT, dns.ClassHESIOD)
	classAny := inClass("example.", dns.TypeA, dns.ClassANY)

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
		// Issue 29: never forwarded, where the upstream's refusal used to
		// count against its health (docs/protocol.md "Classes").
		{"CH TXT version.bind → REFUSED", mustPack(t, versionBind), versionBind.Id, dns.RcodeRefused, dns.OpcodeQuery},
		{"class NONE → REFUSED", mustPack(t, classNone), classNone.Id, dns.RcodeRefused, dns.OpcodeQuery},
		{"class HS → REFUSED", mustPack(t, hesiod), hesiod.Id, dns.RcodeRefused, dns.OpcodeQuery},
		{"class ANY → REFUSED", mustPack(t, classAny), classAny.Id, dns.RcodeRefused, dns.OpcodeQuery},
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
	// Each query is counted after its answer was sent.
	waitFor(t, "three FORMERR counted", func() bool { return count(s.Snapshot(), query.SourceServer, "FORMERR") >= 3 })
	if n := count(s.Snapshot(), query.SourceServer, "FORMERR"); n != 3 {
		t.Errorf("server/FORMERR count = %d, want 3", n)
	}
}

// Issue 29 item 7 (genreport's opcode and opcodeflg): NOTIMP to an
// operation nxdns does not implement carries the header RFC 1035 §4.1.1
// defines for it, ID, opcode and RD copied, and nothing that describes a
// resolution: no RA, CD, AD, AA or TC, whatever the query set.
func TestHandler_notImpToAnUnknownOpcodeSetsOnlyTheDefinedHeader(t *testing.T) {
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		t.Errorf("resolver called for opcode %d", q.Opcode)
		return nil, "", errors.New("unreachable")
	})
	s := startServer(t, state(r))
	for _, opcode := range []int{15, dns.OpcodeNotify, dns.OpcodeUpdate, dns.OpcodeStatus} {
		for _, rd := range []bool{false, true} {
			m := newQuery("example.", dns.TypeSOA)
			m.Opcode, m.RecursionDesired = opcode, rd
			m.CheckingDisabled, m.AuthenticatedData, m.Authoritative, m.Zero = true, true, true, true
			resp := exchange(t, "udp", udpAddr(s), m)
			h := resp.MsgHdr
			if h.Rcode != dns.RcodeNotImplemented || h.Opcode != opcode || h.Id != m.Id || !h.Response || h.RecursionDesired != rd ||
				h.RecursionAvailable || h.CheckingDisabled || h.AuthenticatedData || h.Authoritative || h.Truncated || h.Zero {
				t.Errorf("opcode %d rd %v: header %+v, want NOTIMP with ID, opcode and RD copied and QR alone set", opcode, rd, h)
			}
		}
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
	// The query is counted after its answer was sent.
	waitFor(t, "the refused query counted", func() bool { return s.Snapshot().Refused >= 1 })
	snap := s.Snapshot()
	if snap.Refused != 1 || count(snap, query.SourceRefused, "REFUSED") != 1 {
		t.Errorf("refused = %d, refused/REFUSED = %d, want 1 and 1", snap.Refused, count(snap, query.SourceRefused, "REFUSED"))
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

// blockingResolver holds every query until release closes, signalling
// entered as each arrives.
func blockingResolver(entered chan<- struct{}, release <-chan struct{}) resolverFunc {
	return func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		return answerA("192.0.2.1")(ctx, q)
	}
}

// sendUDP writes one query with the given ID.
func sendUDP(t *testing.T, c *net.UDPConn, id int) {
	t.Helper()
	m := newQuery("flood.example.", dns.TypeA)
	m.Id = uint16(id)
	if _, err := c.Write(mustPack(t, m)); err != nil {
		t.Fatal(err)
	}
}

// The family's cap holds whoever fills it: clients, each within its share,
// that together hold maxUDPInFlight; beyond it a datagram is dropped.
func TestUDP_dropsOverInFlightCap(t *testing.T) {
	const extra = 10
	// Sixteen clients, each well within its share, and each socket's
	// receive queue small enough for its answers.
	const clients = 16
	const per = maxUDPInFlight / clients
	entered := make(chan struct{}, maxUDPInFlight+extra)
	release := make(chan struct{})
	s := startServer(t, state(blockingResolver(entered, release)))
	conns := make([]*net.UDPConn, clients+1)
	for i := range conns {
		conns[i] = dialUDPFrom(t, fmt.Sprintf("127.0.1.%d", i+1), udpAddr(s))
	}
	// In lockstep: a thousand datagrams sent at once overflow the socket's
	// receive queue, and the kernel's drops are not the cap's.
	for i := range maxUDPInFlight {
		sendUDP(t, conns[i/per], i+1)
		<-entered
	}
	for i := range extra {
		sendUDP(t, conns[clients], 1000+i) // a client within its share: the cap is what drops it
	}
	waitFor(t, "the extra datagrams to be dropped", func() bool { return s.Snapshot().UDPDropped == extra })
	if snap := s.Snapshot(); snap.UDPInFlight != maxUDPInFlight || len(entered) != 0 || snap.UDPClientShare != 0 {
		t.Errorf("in flight %d, %d more reached the resolver, %d share drops; want %d, none, none",
			snap.UDPInFlight, len(entered), snap.UDPClientShare, maxUDPInFlight)
	}
	// Spread over the clients, each socket's receive queue holds its answers.
	close(release)
	for i := range maxUDPInFlight {
		if resp := readUDPMsg(t, conns[i/per]); resp.Id > maxUDPInFlight {
			t.Errorf("dropped query %d was answered", resp.Id)
		}
	}
}

// One client holds at most udpClientShare queries in flight; a flood from it
// costs it alone, and another client is still served at once (docs/design.md#robustness,
// issue 13 finding 5).
func TestUDP_oneClientHoldsOnlyItsShare(t *testing.T) {
	entered := make(chan struct{}, maxUDPInFlight)
	release := make(chan struct{})
	blocking := blockingResolver(entered, release)
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		if q.Question[0].Name == "flood.example." {
			return blocking(ctx, q)
		}
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(r))
	flooder := dialUDPFrom(t, "127.0.2.1", udpAddr(s))
	for i := range maxUDPInFlight {
		sendUDP(t, flooder, i+1)
	}
	for range udpClientShare {
		<-entered
	}
	waitFor(t, "the flood beyond the share to be dropped", func() bool {
		return s.Snapshot().UDPClientShare == uint64(maxUDPInFlight-udpClientShare)
	})
	if n := s.Snapshot().UDPInFlight; n != udpClientShare {
		t.Errorf("flooder holds %d in flight, want its share %d", n, udpClientShare)
	}
	normal := dialUDPFrom(t, "127.0.2.2", udpAddr(s))
	q := newQuery("normal.example.", dns.TypeA)
	if _, err := normal.Write(mustPack(t, q)); err != nil {
		t.Fatal(err)
	}
	if resp := readUDPMsg(t, normal); resp.Id != q.Id || len(resp.Answer) != 1 {
		t.Errorf("normal client's answer %v", resp)
	}
	close(release)
}

// Datagrams from source port 0 are dropped before any work: nothing reaches
// the resolver (issue 13 finding 9).
func TestUDP_dropsPortZeroSourceBeforeAnyWork(t *testing.T) {
	var asked atomic.Int64
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		asked.Add(1)
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(r))
	// A kernel hands such a datagram to the socket like any other; the
	// listener's admission is what must drop it. Sending one needs a raw
	// socket, so the test hands it to the admission the reader calls.
	s.mu.Lock()
	l := s.listeners[0]
	s.mu.Unlock()
	s.admitUDP(l, newUDPReader(), mustPack(t, newQuery("a.example.", dns.TypeA)), nil, netip.MustParseAddrPort("127.0.0.1:0"))
	waitFor(t, "the port-0 datagram to be dropped", func() bool { return s.Snapshot().UDPBadSource == 1 })
	if n := asked.Load(); n != 0 {
		t.Errorf("the resolver was asked %d times for a query from port 0", n)
	}
}

func TestDeliverable(t *testing.T) {
	bcast := []netip.Addr{netip.MustParseAddr("192.168.1.255")}
	for _, tc := range []struct {
		from string
		dst  string
		ok   bool
	}{
		{"192.168.1.7:5353", "", true},
		{"192.168.1.7:5353", "192.168.1.2", true},
		{"192.168.1.7:0", "", false},
		{"192.168.1.7:5353", "255.255.255.255", false},
		{"192.168.1.7:5353", "192.168.1.255", false},
		{"192.168.1.7:5353", "224.0.0.251", false},
		{"192.168.1.255:5353", "192.168.1.2", false},
		{"0.0.0.0:5353", "", false},
		{"[ff02::1]:5353", "", false},
		{"[fd00::7]:5353", "ff02::fb", false},
		{"[fd00::7]:5353", "fd00::2", true},
	} {
		var dst netip.Addr
		if tc.dst != "" {
			dst = netip.MustParseAddr(tc.dst)
		}
		if got := deliverable(netip.MustParseAddrPort(tc.from), dst, bcast); got != tc.ok {
			t.Errorf("deliverable(%s → %s) = %v, want %v", tc.from, tc.dst, got, tc.ok)
		}
	}
}

// A client outside dns.allow gets REFUSED whatever is wrong with its
// message: FORMERR, NOTIMP and BADVERS are answers only to clients nxdns
// serves (docs/design.md#robustness, issue 13 finding 10).
func TestHandler_refusesOutsideAllowBeforeAnyOtherCheck(t *testing.T) {
	st := state(answerA("192.0.2.1"))
	st.Allow = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	s := New(Options{}, st)
	client := netip.MustParseAddr("127.0.0.1")
	two := newQuery("two.example.", dns.TypeA)
	two.SetEdns0(1232, false)
	two.Extra = append(two.Extra, two.Extra[0])
	notify := newQuery("n.example.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	v1 := newQuery("v1.example.", dns.TypeA)
	v1.SetEdns0(1232, false)
	v1.Extra[0].(*dns.OPT).SetVersion(1)
	garbage := mustPack(t, newQuery("g.example.", dns.TypeA))
	garbage = append(garbage[:12:12], 0xff, 0xff) // a header, then a body that does not parse
	for name, wire := range map[string][]byte{
		"unparsable body": garbage,
		"two OPTs":        mustPack(t, two),
		"opcode NOTIFY":   mustPack(t, notify),
		"EDNS version 1":  mustPack(t, v1),
		"AXFR":            mustPack(t, newQuery("z.example.", dns.TypeAXFR)),
	} {
		m := new(dns.Msg)
		if err := m.Unpack(s.handle(context.Background(), wire, client, query.UDP)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.Rcode != dns.RcodeRefused {
			t.Errorf("%s from outside allow: %s, want REFUSED", name, dns.RcodeToString[m.Rcode])
		}
	}
	if n := count(s.Snapshot(), query.SourceRefused, "REFUSED"); n != 5 {
		t.Errorf("refused count %d, want 5", n)
	}
}

// BADVERS is counted as BADVERS, not as BADSIG, its number's other name
// (issue 13 finding 11).
func TestStats_BADVERSLabel(t *testing.T) {
	s := New(Options{}, state(answerA("192.0.2.1")))
	v1 := newQuery("v1.example.", dns.TypeA)
	v1.SetEdns0(1232, false)
	v1.Extra[0].(*dns.OPT).SetVersion(1)
	m := new(dns.Msg)
	if err := m.Unpack(s.handle(context.Background(), mustPack(t, v1), netip.MustParseAddr("127.0.0.1"), query.UDP)); err != nil {
		t.Fatal(err)
	}
	if m.Rcode != dns.RcodeBadVers {
		t.Fatalf("rcode %d, want BADVERS", m.Rcode)
	}
	snap := s.Snapshot()
	if n := count(snap, query.SourceServer, "BADVERS"); n != 1 {
		t.Errorf("BADVERS count %d, want 1 (queries: %v)", n, snap.Queries)
	}
}

// nxdns sets RA itself: an upstream that omits it does not make nxdns tell
// its clients it offers no recursion (docs/design.md#robustness, issue 13 finding 12).
func TestRelay_setsRAWhateverTheUpstreamSaid(t *testing.T) {
	noRA := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		m, up, err := answerA("192.0.2.1")(ctx, q)
		m.RecursionAvailable = false
		return m, up, err
	})
	s := New(Options{}, state(noRA))
	m := new(dns.Msg)
	if err := m.Unpack(s.handle(context.Background(), mustPack(t, newQuery("a.example.", dns.TypeA)), netip.MustParseAddr("127.0.0.1"), query.UDP)); err != nil {
		t.Fatal(err)
	}
	if !m.RecursionAvailable {
		t.Error("RA clear in the answer: copied from the upstream")
	}
}

// An answer whose write fails is counted as undelivered, with rcode none,
// not as answered (docs/design.md#robustness, issue 13 finding 9).
func TestServe_undeliveredAnswerIsNotCountedAsAnswered(t *testing.T) {
	s := New(Options{}, state(answerA("192.0.2.1")))
	var seen *query.Event
	s.Swap(&State{Router: pool(answerA("192.0.2.1")), Allow: loopback, Sinks: []query.Sink{sinkFunc(func(e *query.Event) { c := *e; seen = &c })}})
	wire := mustPack(t, newQuery("a.example.", dns.TypeA))
	s.serve(context.Background(), wire, netip.MustParseAddr("127.0.0.1"), query.UDP, func([]byte) error {
		return errors.New("sendmsg: connection refused")
	})
	snap := s.Snapshot()
	if snap.Undelivered != 1 || count(snap, query.SourcePool, "NOERROR") != 0 || count(snap, query.SourcePool, "none") != 1 {
		t.Errorf("undelivered %d, NOERROR %d, none %d; want 1, 0, 1", snap.Undelivered,
			count(snap, query.SourcePool, "NOERROR"), count(snap, query.SourcePool, "none"))
	}
	if seen == nil || seen.Rcode != query.RcodeNone || seen.Reply != nil {
		t.Errorf("event %+v, want rcode none and no reply", seen)
	}
}

type sinkFunc func(*query.Event)

func (f sinkFunc) Record(e *query.Event) { f(e) }
