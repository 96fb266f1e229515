package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

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

// wantReset reports whether a connection from src is closed at once (the
// refusal is a reset; on loopback it may arrive before connect returns,
// failing the dial itself).
func wantReset(t *testing.T, src, addr string) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	over, err := d.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer over.Close()
	over.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err = over.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection from %s: read %v, want it closed at once", src, err)
	}
}

// The family's cap holds whoever fills it: hosts, each within its share,
// that together hold maxTCPConns.
func TestTCP_refusesOverConnectionCap(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	conns := make([]*dns.Conn, maxTCPConns)
	for i := range conns {
		conns[i] = dialTCPFrom(t, fmt.Sprintf("127.0.3.%d", 1+i/tcpClientShare), tcpAddr(s))
	}
	waitFor(t, "every connection to be admitted", func() bool { return s.Snapshot().TCPConns == maxTCPConns })

	wantReset(t, "127.0.3.200", tcpAddr(s)) // a host without a connection: the cap refuses it
	if snap := s.Snapshot(); snap.TCPRefused != 1 || snap.TCPClientShare != 0 {
		t.Errorf("tcp refused = %d (share %d), want 1 (0)", snap.TCPRefused, snap.TCPClientShare)
	}

	// A freed slot admits the next connection, which is served.
	conns[0].Close()
	waitFor(t, "the closed connection to free its slot", func() bool { return s.Snapshot().TCPConns == maxTCPConns-1 })
	exchange(t, "tcp", tcpAddr(s), newQuery("a.example.", dns.TypeA))
}

// One host holds at most tcpClientShare connections, whatever it tries;
// another host is still served (docs/design.md#client-shares, issue 13 finding 4).
func TestTCP_oneHostHoldsOnlyItsShare(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	for range tcpClientShare {
		dialTCPFrom(t, "127.0.4.1", tcpAddr(s))
	}
	waitFor(t, "the host's share to be admitted", func() bool { return s.Snapshot().TCPConns == tcpClientShare })
	for range 3 {
		wantReset(t, "127.0.4.1", tcpAddr(s))
	}
	if snap := s.Snapshot(); snap.TCPClientShare != 3 || snap.TCPConns != tcpClientShare {
		t.Errorf("share refusals %d, open %d; want 3 and %d", snap.TCPClientShare, snap.TCPConns, tcpClientShare)
	}
	c := dialTCPFrom(t, "127.0.4.2", tcpAddr(s))
	q := newQuery("a.example.", dns.TypeA)
	if err := c.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	if resp := readMsg(t, c); resp.Id != q.Id || len(resp.Answer) != 1 {
		t.Errorf("other host's answer %v", resp)
	}
}

// A connection from outside dns.allow is closed at accept and takes no
// capacity (docs/design.md#client-shares, issue 13 finding 4: a WAN host holding 64 connections
// left every LAN client's TCP refused).
func TestTCP_closesDisallowedClientAtAccept(t *testing.T) {
	st := state(answerA("192.0.2.1"))
	st.Allow = []netip.Prefix{netip.MustParsePrefix("127.0.5.0/24")}
	s := startServer(t, st)
	for range maxTCPConns + 1 {
		wantReset(t, "127.0.6.1", tcpAddr(s))
	}
	if snap := s.Snapshot(); snap.TCPNotAllowed != maxTCPConns+1 || snap.TCPConns != 0 {
		t.Errorf("not allowed %d, open %d; want %d and 0", snap.TCPNotAllowed, snap.TCPConns, maxTCPConns+1)
	}
	c := dialTCPFrom(t, "127.0.5.1", tcpAddr(s))
	q := newQuery("a.example.", dns.TypeA)
	if err := c.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	if resp := readMsg(t, c); resp.Id != q.Id || len(resp.Answer) != 1 {
		t.Errorf("allowed client's answer %v", resp)
	}
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

// A client that sends queries but stops reading fills the socket buffers;
// the write bound then disconnects it instead of pinning a goroutine and a
// connection slot.
func TestTCP_closesClientThatStopsReading(t *testing.T) {
	huge := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		var rrs []dns.RR
		for range 240 { // ~60 KB
			rrs = append(rrs, &dns.TXT{
				Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{strings.Repeat("x", 250)},
			})
		}
		return reply(q, rrs...), testUpstream, nil
	})
	s := startServer(t, state(huge), func(s *Server) { s.tcpWrite = 100 * time.Millisecond })
	raw, err := net.Dial("tcp", tcpAddr(s))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.(*net.TCPConn).SetReadBuffer(4096)
	c := &dns.Conn{Conn: raw}
	// Far more answer bytes than loopback buffers hold (bounded: 400 × 60 KB).
	for i := range 400 {
		m := newQuery("huge.example.", dns.TypeTXT)
		m.Id = uint16(i)
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := c.WriteMsg(m); err != nil {
			break // the server already gave up on us and closed
		}
		if s.Snapshot().TCPSlowClosed > 0 {
			break
		}
	}
	waitFor(t, "the stalled reader to be disconnected", func() bool { return s.Snapshot().TCPSlowClosed == 1 })
	waitFor(t, "its slot to be freed", func() bool { return s.Snapshot().TCPConns == 0 })
}
