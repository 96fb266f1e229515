package server

import (
	"context"
	"net"
	"testing"
	"time"
)

// An address another socket holds is refused, whether the holder set
// SO_REUSEPORT or not: the group never quietly shares a port.
func TestListenUDP_refusesAnAddressAnotherSocketHolds(t *testing.T) {
	ctx := context.Background()
	for _, holder := range []net.ListenConfig{{}, {Control: reusePort}} {
		held, err := holder.ListenPacket(ctx, "udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer held.Close()
		if conns, err := listenUDP(ctx, "udp4", held.LocalAddr().String(), 2); err == nil {
			for _, c := range conns {
				c.Close()
			}
			t.Fatalf("bound a group on an address held (SO_REUSEPORT: %v)", holder.Control != nil)
		}
	}
}

// The group's sockets share one port and the kernel spreads clients over
// them: 64 client ports never all land on one of two sockets but with
// probability 2^-63.
func TestListenUDP_groupSpreadsClientsOverItsSockets(t *testing.T) {
	conns := udpGroup(t)
	if got := perSocket(t, conns, 64); got[0] == 0 || got[1] == 0 {
		t.Fatalf("datagrams per socket %v: the kernel did not spread them", got)
	}
}

// Steered, the whole group's datagrams go to its first socket; unsteered,
// the kernel spreads them again.
func TestSteerToFirst_sendsTheGroupToItsFirstSocketAndBack(t *testing.T) {
	conns := udpGroup(t)
	if err := steerToFirst(conns[1], true); err != nil { // set through any socket of the group
		t.Fatal(err)
	}
	if got := perSocket(t, conns, 64); got[1] != 0 {
		t.Fatalf("steered: datagrams per socket %v, want all on the first", got)
	}
	if err := steerToFirst(conns[0], false); err != nil {
		t.Fatal(err)
	}
	if got := perSocket(t, conns, 64); got[0] == 0 || got[1] == 0 {
		t.Fatalf("unsteered: datagrams per socket %v, want both", got)
	}
	if err := steerToFirst(conns[0], false); err != nil {
		t.Fatalf("unsteering twice: %v", err)
	}
}

// A datagram queued on the second socket before a steering is still read
// from it: steering changes where new datagrams go, never loses one.
func TestSteerToFirst_keepsWhatIsAlreadyQueued(t *testing.T) {
	conns := udpGroup(t)
	to := conns[0].LocalAddr().(*net.UDPAddr)
	var onSecond *net.UDPConn
	for range 64 { // a client the kernel's hash puts on the second socket
		c, err := net.DialUDP("udp4", nil, to)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("q"))
		buf := make([]byte, 16)
		conns[1].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := conns[1].ReadFromUDP(buf); err == nil {
			onSecond = c
			break
		}
		conns[0].SetReadDeadline(time.Now().Add(time.Second))
		if _, _, err := conns[0].ReadFromUDP(buf); err != nil {
			t.Fatalf("a datagram on neither socket: %v", err)
		}
	}
	if onSecond == nil {
		t.Fatal("no client of 64 hashed to the second socket")
	}
	onSecond.Write([]byte("queued"))
	if err := steerToFirst(conns[0], true); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	conns[1].SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := conns[1].ReadFromUDP(buf)
	if err != nil || string(buf[:n]) != "queued" {
		t.Fatalf("the second socket after steering: %q, %v; want the datagram queued before", buf[:n], err)
	}
}

// udpGroup is a SO_REUSEPORT group of two sockets on a loopback port,
// closed when the test ends.
func udpGroup(t *testing.T) []*net.UDPConn {
	t.Helper()
	conns, err := listenUDP(context.Background(), "udp4", "127.0.0.1:0", 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	if len(conns) != 2 || conns[0].LocalAddr().String() != conns[1].LocalAddr().String() {
		t.Fatalf("sockets %v", conns)
	}
	return conns
}

// perSocket sends one datagram from each of clients new sockets to the
// group and counts where they arrive.
func perSocket(t *testing.T, conns []*net.UDPConn, clients int) []int {
	t.Helper()
	to := conns[0].LocalAddr().(*net.UDPAddr)
	for range clients {
		c, err := net.DialUDP("udp4", nil, to)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("q"))
		c.Close()
	}
	got := make([]int, len(conns))
	buf := make([]byte, 16)
	end := time.Now().Add(5 * time.Second)
	for total := 0; total < clients; {
		if time.Now().After(end) {
			t.Fatalf("%d of %d datagrams arrived", total, clients)
		}
		for i, c := range conns {
			c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			if _, _, err := c.ReadFromUDP(buf); err == nil {
				got[i]++
				total++
			} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				t.Fatal(err)
			}
		}
	}
	return got
}
