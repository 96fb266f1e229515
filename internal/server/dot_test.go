package server

import (
	"context"
	"crypto/tls"
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

// TestDoT_connectionFlood: hundreds of connections that never handshake fill
// the IPv4 cap and no more; the rest are refused and counted, UDP is still
// answered, and once the handshake bound frees the slots DoT is served again.
func TestDoT_connectionFlood(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.4")), p, func(s *Server) { s.tls.handshake = time.Second })
	addr := dotAddr(s)
	const flood = 300
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
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
	waitFor(t, "the refusal counted", func() bool { return s.TLSSnapshot().DoT.RefusedAccess == 1 })
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
