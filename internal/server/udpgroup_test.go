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
