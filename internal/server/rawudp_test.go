package server

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"
)

// A dual-stack wildcard socket, as the NixOS module's "[::]:53": an IPv6
// peer and an IPv4 one (v4-mapped on this socket) are read with their
// addresses and ports, and the answer, written to the address as the reader
// hands it on (unmapped) and from the address asked (PKTINFO), reaches each
// connected client, which takes nothing from another source.
func TestRawUDP_dualStackPeers(t *testing.T) {
	hasIPv6Loopback(t)
	srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6unspecified})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := enablePktinfo(srv); err != nil {
		t.Fatal(err)
	}
	raw := newRawUDP(srv)
	if raw.rc == nil || !raw.v6 {
		t.Fatalf("raw calls %v, IPv6 socket %v: want both", raw.rc != nil, raw.v6)
	}
	port := strconv.Itoa(srv.LocalAddr().(*net.UDPAddr).Port)
	for _, host := range []string{"::1", "127.0.0.1"} {
		client := dialUDP(t, net.JoinHostPort(host, port))
		if _, err := client.Write([]byte("ping " + host)); err != nil {
			t.Fatal(err)
		}
		buf, oob := make([]byte, 64), make([]byte, oobSize)
		srv.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, oobn, _, from, err := raw.read(buf, oob)
		if err != nil {
			t.Fatal(err)
		}
		want := netip.MustParseAddrPort(client.LocalAddr().String())
		if string(buf[:n]) != "ping "+host || from.Addr().Unmap() != want.Addr() || from.Port() != want.Port() {
			t.Fatalf("read %q from %v; want %q from %v", buf[:n], from, "ping "+host, want)
		}
		if dst := packetDst(oob[:oobn]); dst.Unmap() != netip.MustParseAddr(host) {
			t.Fatalf("destination %v, want %s", dst, host)
		}
		to := netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) // as readUDP hands it on
		if err := raw.write([]byte("pong "+host), sourceOOB(packetDst(oob[:oobn])), to); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err = client.Read(buf)
		if err != nil || string(buf[:n]) != "pong "+host {
			t.Fatalf("client %s read %q, %v; want the answer", host, buf[:n], err)
		}
	}
}

// The reader reads and answers each datagram with headers of its own: no
// allocation per datagram (the client's calls included).
func TestRawUDP_readAndWriteAllocateNothing(t *testing.T) {
	srv := listenUDP4(t)
	raw := newRawUDP(srv)
	client := dialUDP(t, srv.LocalAddr().String())
	buf, oob, q := make([]byte, 64), make([]byte, oobSize), []byte("ping")
	srv.SetReadDeadline(time.Now().Add(time.Minute))
	client.SetReadDeadline(time.Now().Add(time.Minute))
	allocs := allocsPerDatagram(t, func() error {
		if _, err := client.Write(q); err != nil {
			return err
		}
		n, _, _, from, err := raw.read(buf, oob)
		if err == nil {
			err = raw.write(buf[:n], nil, from)
		}
		if err == nil {
			_, err = client.Read(buf)
		}
		return err
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per datagram read and answered", allocs)
	}
}

// Workers answer on the socket the reader reads, all at once, each from
// an address of its own, as on a wildcard socket (the NixOS module's
// default): every datagram arrives whole, to its address, from the address
// its client asked, once. A send header or its source-address message
// shared by two sends would send one from another's address, which the
// connected client drops (and, under -race, is a race).
func TestRawUDP_sendFromManyGoroutines(t *testing.T) {
	srv, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	raw := newRawUDP(srv)
	port := srv.LocalAddr().(*net.UDPAddr).Port
	const writers, each = 8, 30 // fewer than a default receive buffer holds
	clients := make([]*net.UDPConn, writers)
	for i := range clients {
		// Client i asks 127.0.0.(i+1) and takes answers only from it.
		clients[i] = dialUDP(t, net.JoinHostPort(writerAddr(i).String(), strconv.Itoa(port)))
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i, c := range clients {
		to := netip.MustParseAddrPort(c.LocalAddr().String())
		wg.Go(func() {
			for j := range each {
				if err := raw.send([]byte(strconv.Itoa(i)+"/"+strconv.Itoa(j)), writerAddr(i), to); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for i, c := range clients {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for j := range each {
			n, err := c.Read(buf)
			if want := strconv.Itoa(i) + "/" + strconv.Itoa(j); err != nil || string(buf[:n]) != want {
				t.Fatalf("client %d read %q, %v; want %q", i, buf[:n], err, want)
			}
		}
	}
}

// writerAddr is the loopback address writer i of
// TestRawUDP_sendFromManyGoroutines answers from.
func writerAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(i + 1)}) }

// A worker's send, from a chosen address, allocates nothing: its header
// and control message are kept from one send to the next.
//
// Counted without the race detector only: under it sync.Pool drops a
// quarter of what is put back, at random, and each dropped header costs the
// next send three allocations (scripts/test.sh runs the allocation tests
// once more without -race).
func TestRawUDP_sendAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation count of a sync.Pool user: meaningful only without -race")
	}
	srv := listenUDP4(t)
	raw := newRawUDP(srv)
	client := dialUDP(t, srv.LocalAddr().String())
	to := netip.MustParseAddrPort(client.LocalAddr().String())
	src := netip.MustParseAddr("127.0.0.1")
	buf, a := make([]byte, 64), []byte("pong")
	client.SetReadDeadline(time.Now().Add(time.Minute))
	allocs := allocsPerDatagram(t, func() error {
		err := raw.send(a, src, to)
		if err == nil {
			_, err = client.Read(buf)
		}
		return err
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per send", allocs)
	}
}

// allocsPerDatagram is the allocations of one run of exchange, over 100
// runs; t fails with the first error a run returns.
func allocsPerDatagram(t *testing.T, exchange func() error) float64 {
	t.Helper()
	var failed error
	allocs := testing.AllocsPerRun(100, func() {
		if err := exchange(); err != nil && failed == nil {
			failed = err
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	return allocs
}

// A link-local peer's scope id and its zone, the interface's name, map
// both ways, as the standard library's; an index with no interface is its
// number.
func TestRawUDP_zones(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skip("no lo interface")
	}
	if name := zoneName(uint32(lo.Index)); name != "lo" {
		t.Errorf("zone of index %d: %q, want lo", lo.Index, name)
	}
	if i := zoneIndex("lo"); i != uint32(lo.Index) {
		t.Errorf("index of lo: %d, want %d", i, lo.Index)
	}
	if name := zoneName(999999); name != "999999" || zoneIndex(name) != 999999 {
		t.Errorf("an index with no interface: zone %q", name)
	}
	if zoneIndex("") != 0 {
		t.Error("no zone must be scope id 0")
	}
}

// listenUDP4 is a UDP socket on 127.0.0.1, closed when the test ends.
func listenUDP4(t *testing.T) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
