package main

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"
)

// TestUDPFloor_answersEachSocketsQueriesWithTheirIDs: every socket of the
// group answers, each answer a response to its own query (ID, question),
// with no records; a response or a runt sent to it is not answered.
func TestUDPFloor_answersEachSocketsQueriesWithTheirIDs(t *testing.T) {
	conns, err := listenGroup(context.Background(), "127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}, len(conns))
	for _, c := range conns {
		go func() { serve(c); done <- struct{}{} }()
	}
	if udpAddr(conns[0]) != udpAddr(conns[1]) {
		t.Fatalf("sockets on %v and %v, want one address", udpAddr(conns[0]), udpAddr(conns[1]))
	}
	for i := range 20 { // several client ports, so both sockets are reached
		q := new(dns.Msg)
		q.SetQuestion("host.example.", dns.TypeA)
		q.Id = uint16(1000 + i)
		r, err := dns.Exchange(q, udpAddr(conns[0]).String())
		if err != nil {
			t.Fatal(err)
		}
		if !r.Response || r.Id != q.Id || r.Rcode != dns.RcodeSuccess || !r.RecursionAvailable || len(r.Answer) != 0 || r.Question[0] != q.Question[0] {
			t.Fatalf("answer %v to query %d", r, q.Id)
		}
	}
	resp := new(dns.Msg)
	resp.SetQuestion("host.example.", dns.TypeA)
	resp.Response = true
	c, err := net.Dial("udp", udpAddr(conns[0]).String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wire, _ := resp.Pack()
	c.Write(wire)
	c.Write([]byte{1, 2, 3})
	// Then a query from the same port, so the same socket, read in order:
	// the first datagram back must be its answer.
	q := new(dns.Msg)
	q.SetQuestion("after.example.", dns.TypeA)
	q.Id = 4242
	wire, _ = q.Pack()
	c.Write(wire)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil || r.Id != q.Id {
		t.Fatalf("first datagram back: %v (%v), want the answer to query %d: a response or a runt was answered", r, err, q.Id)
	}
	for _, c := range conns {
		c.Close()
	}
	for range conns {
		<-done
	}
}

func TestUDPFloor_badFlagsExitUsage(t *testing.T) {
	for _, args := range [][]string{{"-bogus"}, {"extra"}, {"-sockets", "0"}} {
		if got := run(args, new(nopWriter)); got != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, got, exitUsage)
		}
	}
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }

func udpAddr(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// TestUDPFloor_blockingSocketsAnswerAndWakeAtShutdown: -blocking's sockets
// share one address, answer each query with its own ID, and a cancelled
// context wakes every reader blocked in recvfrom, so the group stops.
func TestUDPFloor_blockingSocketsAnswerAndWakeAtShutdown(t *testing.T) {
	if _, err := listenBlocking("[::1]:0", 1); err == nil {
		t.Error("-blocking on an IPv6 address: no error")
	}
	g, err := listenBlocking("127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	defer g.stop() // a failed check must not leave readers blocked on their threads
	var addrs []netip.AddrPort
	for _, fd := range g.fds {
		sa, err := unix.Getsockname(fd)
		if err != nil {
			t.Fatal(err)
		}
		s4 := sa.(*unix.SockaddrInet4)
		addrs = append(addrs, netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), uint16(s4.Port)))
	}
	if addrs[0] != addrs[1] {
		t.Fatalf("sockets on %v, want one address", addrs)
	}
	done := make(chan struct{}, len(g.fds))
	for _, fd := range g.fds {
		go func() { g.serve(fd); done <- struct{}{} }()
	}
	for i := range 20 {
		q := new(dns.Msg)
		q.SetQuestion("host.example.", dns.TypeA)
		q.Id = uint16(2000 + i)
		r, err := dns.Exchange(q, addrs[0].String())
		if err != nil {
			t.Fatal(err)
		}
		if !r.Response || r.Id != q.Id || r.Question[0] != q.Question[0] {
			t.Fatalf("answer %v to query %d", r, q.Id)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.shutdown(ctx)
	for range g.fds {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("a reader blocked in recvfrom did not wake at shutdown")
		}
	}
}
