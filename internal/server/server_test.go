package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
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

// RFC 7766 §6.2.1.1: the answer to a fast query overtakes a slow one sent
// before it on the same connection.
func TestTCP_pipelinedQueriesAnsweredOutOfOrder(t *testing.T) {
	release := make(chan struct{})
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		if q.Question[0].Name == "slow.example." {
			select {
			case <-release: // only after the fast answer has arrived
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
		}
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(r))
	c := dialTCP(t, tcpAddr(s))
	slow, fast := newQuery("slow.example.", dns.TypeA), newQuery("fast.example.", dns.TypeA)
	slow.Id, fast.Id = 1, 2
	if err := c.WriteMsg(slow); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMsg(fast); err != nil {
		t.Fatal(err)
	}
	if first := readMsg(t, c); first.Id != fast.Id {
		t.Fatalf("first answer has ID %d, want the fast query's %d while the slow one resolves", first.Id, fast.Id)
	}
	close(release)
	if second := readMsg(t, c); second.Id != slow.Id || second.Question[0].Name != "slow.example." {
		t.Fatalf("second answer ID %d %v, want the slow query's", second.Id, second.Question)
	}
}

// The per-connection cap holds queries back: the reader stops at
// maxConnQueries running, and the rest run as slots free.
func TestTCP_capsQueriesPerConnection(t *testing.T) {
	const sent = maxConnQueries + 4
	entered := make(chan struct{}, sent)
	release := make(chan struct{})
	var running, peak atomicMax
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		if q.Question[0].Name == "probe.example." {
			return answerA("192.0.2.9")(ctx, q)
		}
		running.add(1)
		defer running.add(-1)
		peak.observe(running.load())
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(r))
	c := dialTCP(t, tcpAddr(s))
	for i := range sent {
		m := newQuery("q.example.", dns.TypeA)
		m.Id = uint16(i + 1)
		if err := c.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	for range maxConnQueries {
		<-entered
	}
	// A whole exchange on another connection gives the first connection's
	// reader ample time to (wrongly) start a 17th query.
	exchange(t, "tcp", tcpAddr(s), newQuery("probe.example.", dns.TypeA))
	if n := len(entered); n != 0 {
		t.Errorf("%d queries beyond the per-connection cap reached the resolver", n)
	}
	close(release)
	got := make(map[uint16]bool)
	for range sent {
		got[readMsg(t, c).Id] = true
	}
	if len(got) != sent {
		t.Errorf("%d distinct answers, want %d", len(got), sent)
	}
	if p := peak.load(); p > maxConnQueries {
		t.Errorf("%d queries of one connection ran at once, cap is %d", p, maxConnQueries)
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
	for i := range maxUDPInFlight {
		send(i + 1)
	}
	for range maxUDPInFlight {
		<-entered
	}
	for i := range extra {
		send(1000 + i)
	}
	waitFor(t, "the extra datagrams to be dropped", func() bool { return s.Snapshot().UDPDropped == extra })
	if snap := s.Snapshot(); snap.UDPInFlight != maxUDPInFlight || len(entered) != 0 {
		t.Errorf("in flight %d, %d more reached the resolver; want %d and none", snap.UDPInFlight, len(entered), maxUDPInFlight)
	}
	close(release)
	for range maxUDPInFlight {
		if resp := readUDPMsg(t, c); resp.Id > maxUDPInFlight {
			t.Errorf("dropped query %d was answered", resp.Id)
		}
	}
}

func TestTCP_refusesOverConnectionCap(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	conns := make([]*dns.Conn, maxTCPConns)
	for i := range conns {
		conns[i] = dialTCP(t, tcpAddr(s))
	}
	waitFor(t, "every connection to be admitted", func() bool { return s.Snapshot().TCPConns == maxTCPConns })

	over := dialTCP(t, tcpAddr(s))
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection over the cap: read %v, want it closed at once", err)
	}
	if n := s.Snapshot().TCPRefused; n != 1 {
		t.Errorf("tcp refused = %d, want 1", n)
	}

	// A freed slot admits the next connection, which is served.
	conns[0].Close()
	waitFor(t, "the closed connection to free its slot", func() bool { return s.Snapshot().TCPConns == maxTCPConns-1 })
	exchange(t, "tcp", tcpAddr(s), newQuery("a.example.", dns.TypeA))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestTCP_closesIdleConnection(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")), func(s *Server) { s.tcpIdle = 100 * time.Millisecond })
	c := dialTCP(t, tcpAddr(s))
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("idle connection: read %v, want EOF", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v, want about the 100 ms idle bound", d)
	}
	if n := s.Snapshot().TCPIdleClosed; n != 1 {
		t.Errorf("tcp idle closed = %d, want 1", n)
	}
}

// A client that sends a length prefix and then trickles (or stops) is cut
// off after the read bound, though the idle bound is long.
func TestTCP_closesSlowClient(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")), func(s *Server) { s.tcpRead = 100 * time.Millisecond })
	c := dialTCP(t, tcpAddr(s))
	if _, err := c.Conn.Write([]byte{0, 30, 0x12, 0x34, 1}); err != nil { // 30 bytes announced, 3 sent
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("slow client: read %v, want EOF", err)
	}
	if n := s.Snapshot().TCPSlowClosed; n != 1 {
		t.Errorf("tcp slow closed = %d, want 1", n)
	}
}

func TestTCP_closesOnOversizedQuery(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	c := dialTCP(t, tcpAddr(s))
	var prefix [2]byte
	binary.BigEndian.PutUint16(prefix[:], maxTCPQuerySize+1)
	if _, err := c.Conn.Write(prefix[:]); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("oversized query: read %v, want EOF", err)
	}
	if n := s.Snapshot().Malformed; n != 1 {
		t.Errorf("malformed = %d, want 1", n)
	}
}

func TestSwap_newQueriesUseNewStateAndDrainedWaitsForOld(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	old := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		close(entered)
		<-release
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(old))
	c := dialUDP(t, udpAddr(s))
	inflight := newQuery("old.example.", dns.TypeA)
	if _, err := c.Write(mustPack(t, inflight)); err != nil {
		t.Fatal(err)
	}
	<-entered

	drained := s.Swap(state(answerA("192.0.2.2")))
	resp := exchange(t, "udp", udpAddr(s), newQuery("new.example.", dns.TypeA))
	if a := resp.Answer[0].(*dns.A).A.String(); a != "192.0.2.2" {
		t.Errorf("query after Swap answered %s, want the new state's 192.0.2.2", a)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := drained(done); err == nil {
		t.Fatal("drained returned nil while a query of the old state is in flight")
	}

	close(release)
	if resp := readUDPMsg(t, c); resp.Id != inflight.Id || resp.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Errorf("in-flight query answered %v, want the old state's 192.0.2.1", resp.Answer)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := drained(ctx); err != nil {
		t.Errorf("drained after the old query finished: %v", err)
	}
}

func TestSwap_drainedReturnsAtOnceWhenIdle(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	exchange(t, "udp", udpAddr(s), newQuery("a.example.", dns.TypeA))
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a wait would fail
	if err := s.Swap(state(answerA("192.0.2.2")))(ctx); err != nil {
		t.Errorf("drained with nothing in flight: %v", err)
	}
}

func hasIPv6Loopback(t *testing.T) {
	t.Helper()
	c, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	c.Close()
}

func TestListen_reconcilesAddresses(t *testing.T) {
	hasIPv6Loopback(t)
	s := New(Options{}, state(answerA("192.0.2.1")))
	defer s.Shutdown(context.Background())
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	u1, t1 := s.Addrs()

	if err := s.Listen([]string{"127.0.0.1:0", "[::1]:0"}); err != nil {
		t.Fatal(err)
	}
	u2, t2 := s.Addrs()
	if len(u2) != 2 || u2[0].String() != u1[0].String() || t2[0].String() != t1[0].String() {
		t.Fatalf("after adding ::1: %v %v; want the 127.0.0.1 sockets kept (%v %v) and one more", u2, t2, u1, t1)
	}
	exchange(t, "udp", u2[1].String(), newQuery("v6.example.", dns.TypeA))
	exchange(t, "tcp", t2[1].String(), newQuery("v6.example.", dns.TypeA))

	if err := s.Listen([]string{"[::1]:0"}); err != nil {
		t.Fatal(err)
	}
	u3, _ := s.Addrs()
	if len(u3) != 1 || u3[0].String() != u2[1].String() {
		t.Fatalf("after removing 127.0.0.1: %v, want only %v", u3, u2[1])
	}
	if c, err := net.Dial("tcp", t1[0].String()); err == nil {
		c.Close()
		t.Error("removed TCP listener still accepts")
	}
	client := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	waitFor(t, "the removed UDP socket to close", func() bool {
		_, _, err := client.Exchange(newQuery("a.example.", dns.TypeA), u1[0].String())
		return errors.Is(err, syscall.ECONNREFUSED)
	})
}

func TestListen_bindFailureNamesAddressAndKeepsServing(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s := startServer(t, state(answerA("192.0.2.1")))
	before, _ := s.Addrs()

	err = s.Listen([]string{"127.0.0.1:0", busy.LocalAddr().String()})
	if err == nil || !strings.Contains(err.Error(), busy.LocalAddr().String()) {
		t.Fatalf("Listen with a busy address: %v, want an error naming %s", err, busy.LocalAddr())
	}
	after, _ := s.Addrs()
	if len(after) != 1 || after[0].String() != before[0].String() {
		t.Errorf("listeners after a failed Listen: %v, want unchanged %v", after, before)
	}
	exchange(t, "udp", udpAddr(s), newQuery("a.example.", dns.TypeA))
}

func TestShutdown_drainsInFlightQueries(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		close(entered)
		<-release
		return answerA("192.0.2.1")(ctx, q)
	})
	s := New(Options{}, state(r))
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	addr := tcpAddr(s)
	c := dialTCP(t, addr)
	q := newQuery("a.example.", dns.TypeA)
	if err := c.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	<-entered

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	waitFor(t, "Shutdown to stop accepting", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	if resp := readMsg(t, c); resp.Id != q.Id || resp.Rcode != dns.RcodeSuccess {
		t.Errorf("in-flight query: id %d rcode %s, want its NOERROR answer", resp.Id, dns.RcodeToString[resp.Rcode])
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v, want nil (everything drained)", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection after Shutdown: read %v, want EOF", err)
	}
}

// When Shutdown's ctx ends first, the queries still running see their ctx
// cancelled and the clients get nothing — not even the SERVFAIL a resolver
// error without a Kind would otherwise produce.
func TestShutdown_cancelsAfterDeadlineAndAnswersNothing(t *testing.T) {
	entered := make(chan struct{}, 2)
	causes := make(chan error, 2)
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		entered <- struct{}{}
		<-ctx.Done()
		causes <- ctx.Err()
		return nil, "", ctx.Err()
	})
	s := New(Options{}, state(r))
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	addr := tcpAddr(s)
	tc, uc := dialTCP(t, addr), dialUDP(t, udpAddr(s))
	if err := tc.WriteMsg(newQuery("tcp.example.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.Write(mustPack(t, newQuery("udp.example.", dns.TypeA))); err != nil {
		t.Fatal(err)
	}
	<-entered
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	waitFor(t, "Shutdown to stop accepting", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	cancel() // the drain deadline passes with both queries still running
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
	for range 2 {
		if err := <-causes; !errors.Is(err, context.Canceled) {
			t.Errorf("resolver ctx: %v, want cancelled", err)
		}
	}
	tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("TCP client: read %v, want EOF without an answer", err)
	}
	// Shutdown has returned: every answer that was going to be written has
	// been, and loopback delivers at once, so a short wait proves absence.
	uc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := uc.Read(make([]byte, 512)); !isTimeout(err) {
		t.Errorf("UDP client got %d bytes (err %v), want nothing", n, err)
	}
	if err := s.Listen([]string{"127.0.0.1:0"}); err == nil {
		t.Error("Listen after Shutdown succeeded")
	}
}
