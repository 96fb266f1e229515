package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestDoT_answersWithKeepaliveAndCountsTheProto(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.1")), p)
	c := dialDoT(t, dotAddr(s), p.clientConf)
	if got := c.Conn.(*tls.Conn).ConnectionState(); got.Version < tls.VersionTLS12 || got.NegotiatedProtocol != "" && got.NegotiatedProtocol != "dot" {
		t.Fatalf("connection state: version %x, ALPN %q", got.Version, got.NegotiatedProtocol)
	}
	if err := c.WriteMsg(tlsQuery("a.example.")); err != nil {
		t.Fatal(err)
	}
	resp := readMsg(t, c)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("answer %v", resp.Answer)
	}
	var keepalive *dns.EDNS0_TCP_KEEPALIVE
	for _, o := range resp.IsEdns0().Option {
		if k, ok := o.(*dns.EDNS0_TCP_KEEPALIVE); ok {
			keepalive = k
		}
	}
	if keepalive == nil || time.Duration(keepalive.Timeout)*keepaliveUnit != tcpIdleTimeout {
		t.Fatalf("keepalive option %+v, want the idle bound %v (RFC 7828)", keepalive, tcpIdleTimeout)
	}
	// A query is counted after its answer was written: wait for the count.
	waitFor(t, "the DoT query counted", func() bool {
		for _, pc := range s.Snapshot().Protos {
			if pc.Proto == "dot" && pc.Count >= 1 {
				return true
			}
		}
		return false
	})
	for _, pc := range s.Snapshot().Protos {
		if want := map[string]uint64{"dot": 1}[pc.Proto]; pc.Count != want {
			t.Errorf("proto %s counted %d, want %d", pc.Proto, pc.Count, want)
		}
	}
}

// TestDoT_pipelinedAnsweredOutOfOrder: a slow query sent first does not hold
// up a fast one sent after it on the same connection (RFC 7766 §6.2.1.1).
func TestDoT_pipelinedAnsweredOutOfOrder(t *testing.T) {
	p := newTestPKI(t)
	release := make(chan struct{})
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		if q.Question[0].Name == "slow.example." {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
		}
		return reply(q, aRecord(q.Question[0].Name, "192.0.2.2")), testUpstream, nil
	})
	s := startTLSServer(t, state(r), p)
	c := dialDoT(t, dotAddr(s), p.clientConf)
	slow, fast := tlsQuery("slow.example."), tlsQuery("fast.example.")
	slow.Id, fast.Id = 1, 2
	for _, m := range []*dns.Msg{slow, fast} {
		if err := c.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if first := readMsg(t, c); first.Id != fast.Id {
		t.Fatalf("first answer is for id %d, want the fast query's %d", first.Id, fast.Id)
	}
	close(release)
	if second := readMsg(t, c); second.Id != slow.Id {
		t.Fatalf("second answer is for id %d, want the slow query's %d", second.Id, slow.Id)
	}
}

// TestDoT_badClients: each gets its error or is cut off, is counted, and
// leaves the server answering everyone else.
func TestDoT_badClients(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.3")), p, func(s *Server) { s.tls.handshake = 300 * time.Millisecond })
	addr := dotAddr(s)

	t.Run("never finishes its handshake", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		assertClosed(t, c, 5*time.Second)
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Errorf("cut off after %v, before the handshake bound", d)
		}
		waitFor(t, "a handshake timeout counted", func() bool { return s.TLSSnapshot().DoT.HandshakeTimeouts == 1 })
	})
	t.Run("sends garbage", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		assertClosed(t, c, 5*time.Second)
		waitFor(t, "a handshake failure counted", func() bool { return s.TLSSnapshot().DoT.HandshakeFailures == 1 })
	})
	t.Run("offers only TLS 1.0 and 1.1", func(t *testing.T) {
		conf := p.clientConf.Clone()
		conf.MinVersion, conf.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, conf)
		if err == nil {
			c.Close()
			t.Fatal("a TLS 1.1 handshake succeeded")
		}
		waitFor(t, "a second handshake failure counted", func() bool { return s.TLSSnapshot().DoT.HandshakeFailures == 2 })
	})
	t.Run("good client still served", func(t *testing.T) {
		c := dialDoT(t, addr, p.clientConf)
		c.WriteMsg(tlsQuery("ok.example."))
		if resp := readMsg(t, c); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("answer %v", resp)
		}
	})
}

// TestDoT_connectionFlood: hundreds of connections that never handshake,
// from hosts each within its share, fill the IPv4 cap and no more; the rest
// are refused and counted as capacity, UDP is still answered, and once the
// handshake bound frees the slots DoT is served again.
func TestDoT_connectionFlood(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.4")), p, func(s *Server) { s.tls.handshake = time.Second })
	addr := dotAddr(s)
	const flood, perHost = 300, tcpClientShare / 2
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range flood {
		d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.5.%d", 1+i/perHost))}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			continue // refused so fast that connect saw the reset: what the cap does
		}
		conns = append(conns, c)
	}
	waitFor(t, "the connections over the cap refused", func() bool {
		return s.TLSSnapshot().DoT.RefusedCapacity >= flood-maxTCPConns
	})
	if n := s.Snapshot().TCPConns; n > maxTCPConns {
		t.Fatalf("%d connections held, over the cap %d", n, maxTCPConns)
	}
	if n := s.TLSSnapshot().DoT.RefusedShare; n != 0 {
		t.Fatalf("%d refused as over a share; every host stayed within its own", n)
	}
	if resp := exchange(t, "udp", udpAddr(s), newQuery("udp.example.", dns.TypeA)); len(resp.Answer) != 1 {
		t.Fatalf("UDP answer during the flood: %v", resp)
	}
	waitFor(t, "the flood's slots freed by the handshake bound", func() bool { return s.Snapshot().TCPConns == 0 })
	c := dialDoT(t, addr, p.clientConf)
	c.WriteMsg(tlsQuery("after.example."))
	if resp := readMsg(t, c); len(resp.Answer) != 1 {
		t.Fatalf("answer after the flood: %v", resp)
	}
}

// TestDoT_oneHostHoldsOnlyItsShare: one address holds at most its share of
// the TCP cap over plain TCP and DoT together (docs/design.md#client-shares); its
// next DoT connections are reset at accept and counted as client_share, and
// another host is still served.
func TestDoT_oneHostHoldsOnlyItsShare(t *testing.T) {
	p := newTestPKI(t)
	// Idle connections hold their places for the whole test.
	s := startTLSServer(t, state(answerA("192.0.2.6")), p, func(s *Server) { s.tls.handshake = time.Minute })
	addr := dotAddr(s)
	const host = "127.0.6.1"
	for range tcpClientShare / 2 {
		dialTCPFrom(t, host, tcpAddr(s))
	}
	for range tcpClientShare - tcpClientShare/2 {
		dialTCPFrom(t, host, addr) // DoT, never handshaken
	}
	waitFor(t, "the host's share to be admitted", func() bool { return s.Snapshot().TCPConns == tcpClientShare })
	for range 3 {
		wantReset(t, host, addr)
	}
	if got := s.TLSSnapshot().DoT; got.RefusedShare != 3 || got.RefusedCapacity != 0 {
		t.Errorf("DoT refused as over the share %d, over the cap %d; want 3 and 0", got.RefusedShare, got.RefusedCapacity)
	}
	if n := s.Snapshot().TCPConns; n != tcpClientShare {
		t.Errorf("%d connections held, want the share %d", n, tcpClientShare)
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.6.2")}}, Config: p.clientConf}
	other, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("another host's DoT: %v", err)
	}
	defer other.Close()
	oc := &dns.Conn{Conn: other}
	oc.WriteMsg(tlsQuery("other.example."))
	if resp := readMsg(t, oc); len(resp.Answer) != 1 {
		t.Fatalf("another host's answer: %v", resp)
	}
}

// TestDoT_outsideAllowClosedAtAccept: a peer outside dns.allow gets no
// handshake and takes no capacity.
func TestDoT_outsideAllowClosedAtAccept(t *testing.T) {
	p := newTestPKI(t)
	st := state(answerA("192.0.2.5"))
	st.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	s := startTLSServer(t, st, p)
	_, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", dotAddr(s), p.clientConf)
	if err == nil {
		t.Fatal("a client outside dns.allow completed a handshake")
	}
	waitFor(t, "the refusal counted", func() bool { return s.TLSSnapshot().DoT.RefusedNotAllowed == 1 })
	if n := s.Snapshot().TCPConns; n != 0 {
		t.Fatalf("%d connections held after the refusal", n)
	}
}

// assertClosed fails unless the server closes c (EOF or reset, possibly
// after a TLS alert) within bound.
func assertClosed(t *testing.T, c net.Conn, bound time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(bound))
	_, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server did not close the connection within %v", bound)
	}
}
