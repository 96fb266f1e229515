package forward

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/config"
)

// TestMain fails the package if any test leaves a goroutine behind: the
// fakes, the client's AfterFuncs and Names' lookups must all end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var loopback = netip.MustParseAddr("127.0.0.1")

// startUDP runs a raw UDP resolver on loopback whose behaviour the test
// writes: serve gets every decodable query, in order, on the fake's one
// goroutine, and replies (or not) on conn. It may block; t.Context() ends
// when the test does, before the socket is closed.
func startUDP(t *testing.T, serve func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg)) netip.AddrPort {
	t.Helper()
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	return serveUDP(t, conn, serve)
}

func serveUDP(t *testing.T, conn *net.UDPConn, serve func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg)) netip.AddrPort {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, dns.MaxMsgSize)
		for {
			n, from, err := conn.ReadFromUDPAddrPort(buf)
			if err != nil {
				return // closed by cleanup
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) == nil {
				serve(conn, from, q)
			}
		}
	})
	t.Cleanup(func() {
		conn.Close()
		wg.Wait()
	})
	return netip.MustParseAddrPort(conn.LocalAddr().String())
}

// reply sends m to a client, failing the test on error while it runs.
func reply(t *testing.T, conn *net.UDPConn, to netip.AddrPort, m *dns.Msg) {
	t.Helper()
	wire, err := m.Pack()
	if err != nil {
		t.Errorf("fake: pack: %v", err)
		return
	}
	// The test's context ends before cleanup closes the socket, so a write
	// that lost that race is the test ending, not a failure.
	if _, err := conn.WriteToUDPAddrPort(wire, to); err != nil && t.Context().Err() == nil {
		t.Errorf("fake: write: %v", err)
	}
}

// startTCPServer runs a miekg/dns TCP server on ln with its own handler and
// waits until it serves.
func startTCPServer(t *testing.T, ln net.Listener, h dns.HandlerFunc) netip.AddrPort {
	t.Helper()
	started := make(chan struct{})
	srv := &dns.Server{Listener: ln, Handler: h, NotifyStartedFunc: func() { close(started) }}
	return runServer(t, srv, started, ln.Addr().String())
}

// startUDPServer runs a miekg/dns UDP server on loopback.
func startUDPServer(t testing.TB, h dns.HandlerFunc) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
	return runServer(t, srv, started, pc.LocalAddr().String())
}

func runServer(t testing.TB, srv *dns.Server, started chan struct{}, addr string) netip.AddrPort {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.ActivateAndServe(); err != nil {
			t.Errorf("fake server: %v", err)
		}
	})
	t.Cleanup(func() {
		srv.Shutdown()
		wg.Wait()
	})
	<-started
	return netip.MustParseAddrPort(addr)
}

// silentTCP accepts connections and never answers, holding them open until
// the test ends. accepts counts them.
func silentTCP(t *testing.T, ln net.Listener) (accepts *atomic.Int32) {
	t.Helper()
	accepts = new(atomic.Int32)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range held {
			c.Close()
		}
	})
	return accepts
}

// listenPair binds a UDP socket and a TCP listener on the same loopback port,
// as a LAN resolver serves both on port 53.
func listenPair(t *testing.T) (*net.UDPConn, net.Listener) {
	t.Helper()
	for range 20 { // the UDP port of a fresh TCP port is almost always free
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(ln.Addr().String())))
		if err == nil {
			return conn, ln
		}
		ln.Close()
	}
	t.Fatal("no loopback port free for both UDP and TCP")
	return nil, nil
}

// answerA is a response to q with one A record.
func answerA(q *dns.Msg, ip string) *dns.Msg {
	r := new(dns.Msg).SetReply(q)
	r.Answer = append(r.Answer, &dns.A{
		Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.ParseIP(ip),
	})
	return r
}

// truncatedReply is an empty response to q with TC=1.
func truncatedReply(q *dns.Msg) *dns.Msg {
	r := new(dns.Msg).SetReply(q)
	r.Truncated = true
	return r
}

// newTestTable builds a Table of one zone per pair (zone, resolver URL).
func newTestTable(t *testing.T, timeout time.Duration, pairs ...string) *Table {
	t.Helper()
	var zones []config.ForwardZone
	for i := 0; i+1 < len(pairs); i += 2 {
		zones = append(zones, config.ForwardZone{Zone: pairs[i], Resolver: pairs[i+1]})
	}
	tab, err := NewTable(zones, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// newTestZone is the single zone "lan." served by the resolver at addr.
func newTestZone(t *testing.T, scheme string, addr netip.AddrPort, timeout time.Duration) *Zone {
	t.Helper()
	z, ok := newTestTable(t, timeout, "lan", scheme+"://"+addr.String()).Match("lan.")
	if !ok {
		t.Fatal("zone lan. not built")
	}
	return z
}

// queryA is an A query for name.
func queryA(name string) *dns.Msg {
	return new(dns.Msg).SetQuestion(name, dns.TypeA)
}

// firstA is the first A record of resp, or "".
func firstA(resp *dns.Msg) string {
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return ""
}
