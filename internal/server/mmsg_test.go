package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/nxdns/nxdns/internal/query"
)

// mmsgRig is a UDP socket read and written through an mmsgConn, with
// batch-sized slots as udpBatch has them.
type mmsgRig struct {
	sock *net.UDPConn
	c    *mmsgConn
	in   []ipv4.Message
}

func newMmsgRig(t *testing.T, network, addr string, slot int) *mmsgRig {
	t.Helper()
	sock, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sock.Close() })
	r := &mmsgRig{sock: sock, c: newMmsgConn(sock, network == "udp6"), in: make([]ipv4.Message, udpBatchSize)}
	for i := range r.in {
		r.in[i].Buffers = [][]byte{make([]byte, slot)}
	}
	return r
}

// readAll reads until want datagrams arrived, each read bounded by a
// deadline, and returns payload → sender.
func (r *mmsgRig) readAll(t *testing.T, want int) map[string]*net.UDPAddr {
	t.Helper()
	got := map[string]*net.UDPAddr{}
	for len(got) < want {
		r.sock.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := r.c.ReadBatch(r.in, 0)
		if err != nil {
			t.Fatalf("after %d of %d datagrams: %v", len(got), want, err)
		}
		for _, m := range r.in[:n] {
			a := *m.Addr.(*net.UDPAddr) // the conn's own, valid until the next read
			a.IP = append(net.IP(nil), a.IP...)
			got[string(m.Buffers[0][:m.N])] = &a
		}
	}
	return got
}

// Datagrams from several senders, queued before the read, are read with
// each one's own sender, and answers written in one batch reach each
// sender.
func TestMmsgConn_readsEachSenderAndAnswersIt(t *testing.T) {
	r := newMmsgRig(t, "udp4", "127.0.0.1:0", udpReadSize)
	var clients []*net.UDPConn
	for i := range 3 {
		c, err := net.DialUDP("udp4", nil, r.sock.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
		for j := range 2 {
			if _, err := fmt.Fprintf(c, "client %d query %d", i, j); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := r.readAll(t, 6)
	for i, c := range clients {
		for j := range 2 {
			from := got[fmt.Sprintf("client %d query %d", i, j)]
			if from == nil || from.AddrPort() != c.LocalAddr().(*net.UDPAddr).AddrPort() {
				t.Errorf("client %d query %d: sender %v, want %v", i, j, from, c.LocalAddr())
			}
		}
	}

	// One more datagram each, then the answers go to the addresses the read
	// gave (the conn's own: the sender's socket address as the kernel had it).
	for i, c := range clients {
		fmt.Fprintf(c, "again %d", i)
	}
	r.sock.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []ipv4.Message
	for len(out) < len(clients) {
		n, err := r.c.ReadBatch(r.in[len(out):], 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.in[len(out) : len(out)+n] {
			out = append(out, ipv4.Message{Buffers: [][]byte{append([]byte("answer to "), m.Buffers[0][:m.N]...)}, Addr: m.Addr})
		}
	}
	if n, err := r.c.WriteBatch(out, 0); n != len(out) || err != nil {
		t.Fatalf("wrote %d of %d: %v", n, len(out), err)
	}
	for i, c := range clients {
		expectDatagram(t, c, fmt.Sprintf("answer to again %d", i))
	}
}

// A datagram longer than its slot is read cut short and flagged, never
// taken for a whole one.
func TestMmsgConn_flagsATruncatedDatagram(t *testing.T) {
	r := newMmsgRig(t, "udp4", "127.0.0.1:0", 8)
	c, err := net.DialUDP("udp4", nil, r.sock.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("twenty bytes long..."))
	c.Write([]byte("short"))
	var flags []int
	for len(flags) < 2 {
		r.sock.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := r.c.ReadBatch(r.in, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.in[:n] {
			flags = append(flags, m.Flags&unix.MSG_TRUNC)
		}
	}
	if flags[0] == 0 || flags[1] != 0 {
		t.Fatalf("MSG_TRUNC flags %v, want set on the long datagram only", flags)
	}
}

// On an IPv6 socket an IPv6 sender is read and answered; an answer to an
// address the read did not give is marshalled, an IPv4 one v4-mapped on
// a dual-stack socket.
func TestMmsgConn_IPv6(t *testing.T) {
	hasIPv6Loopback(t)
	r := newMmsgRig(t, "udp6", "[::1]:0", udpReadSize)
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.WriteTo([]byte("v6 query"), r.sock.LocalAddr())
	from := r.readAll(t, 1)["v6 query"]
	if from == nil || from.AddrPort() != c.LocalAddr().(*net.UDPAddr).AddrPort() {
		t.Fatalf("sender %v, want %v", from, c.LocalAddr())
	}
	// from is a copy: the conn marshals it rather than reusing its own.
	if n, err := r.c.WriteBatch([]ipv4.Message{{Buffers: [][]byte{[]byte("v6 answer")}, Addr: from}}, 0); n != 1 || err != nil {
		t.Fatalf("wrote %d: %v", n, err)
	}
	expectDatagram(t, c, "v6 answer")
}

// A write whose first message cannot be sent reports none sent and the
// error; an IPv6 address on an IPv4 socket is refused before the call.
func TestMmsgConn_refusedWrites(t *testing.T) {
	r := newMmsgRig(t, "udp4", "127.0.0.1:0", udpReadSize)
	v6 := &net.UDPAddr{IP: net.IPv6loopback, Port: 53}
	if n, err := r.c.WriteBatch([]ipv4.Message{{Buffers: [][]byte{[]byte("x")}, Addr: v6}}, 0); n != 0 || err == nil {
		t.Errorf("IPv6 destination on an IPv4 socket: %d sent, %v", n, err)
	}
	// Port 0 is no destination: the kernel refuses the first message.
	zero := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 0}
	if n, err := r.c.WriteBatch([]ipv4.Message{{Buffers: [][]byte{[]byte("x")}, Addr: zero}}, 0); n != 0 || err == nil {
		t.Errorf("port 0: %d sent, %v", n, err)
	}
	if n, err := r.c.WriteBatch([]ipv4.Message{{Buffers: [][]byte{[]byte("a"), []byte("b")}, Addr: zero}}, 0); n != 0 || !errors.Is(err, errMmsgMessage) {
		t.Errorf("two buffers: %d sent, %v", n, err)
	}
}

// A read with nothing queued waits in the poller: its deadline ends it,
// and closing the socket ends it with net.ErrClosed (readUDP's way out).
func TestMmsgConn_waitsForDatagrams(t *testing.T) {
	r := newMmsgRig(t, "udp4", "127.0.0.1:0", udpReadSize)
	r.sock.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := r.c.ReadBatch(r.in, 0); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("empty socket past its deadline: %v", err)
	}
	r.sock.SetReadDeadline(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := r.c.ReadBatch(r.in, 0)
		done <- err
	}()
	r.sock.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("read on a closed socket: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read did not end when its socket closed")
	}
}

// Reading a datagram and answering it allocates nothing.
func TestMmsgConn_allocatesNothing(t *testing.T) {
	r := newMmsgRig(t, "udp4", "127.0.0.1:0", udpReadSize)
	c, err := net.DialUDP("udp4", nil, r.sock.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	query, buf := []byte("query"), make([]byte, 16)
	out := []ipv4.Message{{Buffers: [][]byte{[]byte("answer")}}}
	r.sock.SetReadDeadline(time.Now().Add(10 * time.Second))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	allocs := testing.AllocsPerRun(50, func() {
		c.Write(query)
		n, err := r.c.ReadBatch(r.in, 0)
		if n != 1 || err != nil {
			t.Fatalf("read %d: %v", n, err)
		}
		out[0].Addr = r.in[0].Addr
		if n, err := r.c.WriteBatch(out, 0); n != 1 || err != nil {
			t.Fatalf("wrote %d: %v", n, err)
		}
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	// The client's own Write and Read are the standard library's: what is
	// measured beyond them must be nothing.
	if allocs > 0 {
		t.Fatalf("%.1f allocations per datagram read and answered", allocs)
	}
}

// A link-local sender's scope survives the read: as the zone of its
// address, which the standard library's writes take (the general path),
// and in the socket address the batch's answer is sent to (the fast path).
// Loopback has no link-local address, so the kernel's socket address is
// made here.
func TestMmsgConn_keepsALinkLocalSendersScope(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	c := newMmsgRig(t, "udp4", "127.0.0.1:0", udpReadSize).c // the socket is not used
	sa := &c.rname[0]
	sa.Family = unix.AF_INET6
	sa.Addr = netip.MustParseAddr("fe80::1").As16()
	sa.Scope_id = uint32(lo.Index)
	putNetPort(&sa.Port, 5353)
	from := c.sender(0)
	if from.Zone != "lo" || from.AddrPort() != netip.MustParseAddrPort("[fe80::1%lo]:5353") {
		t.Fatalf("sender %v (zone %q), want [fe80::1%%lo]:5353", from, from.Zone)
	}
	var out unix.RawSockaddrInet6
	if n, err := c.destination(&out, from); err != nil || n != unix.SizeofSockaddrInet6 || out != *sa {
		t.Fatalf("answer's address %+v (%d, %v), want the sender's %+v", out, n, err, *sa)
	}
	// The client it names has no zone, so prefixes match it.
	if got := query.ClientOf(from.AddrPort().Addr()); got != netip.MustParseAddr("fe80::1") || !allowed([]netip.Prefix{netip.MustParsePrefix("fe80::/10")}, got) {
		t.Fatalf("client %v, want fe80::1 inside fe80::/10", got)
	}
	if got := query.ClientOfNet(&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0"}); got != netip.MustParseAddr("fe80::1") {
		t.Fatalf("TCP client %v, want fe80::1", got)
	}
}

// A link-local sender's zone is its interface's name (the standard
// library resolves a name it knows without refreshing its interface
// table), the number when no interface has that index; looked up once.
func TestZoneNames_nameOnceThenKept(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	var z zoneNames
	now := time.Now()
	if got := z.zoneName(uint32(lo.Index), now); got != "lo" {
		t.Fatalf("zone of index %d: %q, want lo", lo.Index, got)
	}
	if n := testing.AllocsPerRun(20, func() { z.zoneName(uint32(lo.Index), now) }); n != 0 {
		t.Errorf("a kept name cost %.1f allocations", n)
	}
	if got := z.zoneName(1<<31, now); got != "2147483648" {
		t.Errorf("an unknown index: %q, want the number", got)
	}
}

// A batch whose later message cannot be sent still sends those before it
// and reports how many; flush then finds the bad one first.
func TestMmsgConn_sendsWhatPrecedesARefusedMessage(t *testing.T) {
	r := newMmsgRig(t, "udp4", "127.0.0.1:0", udpReadSize)
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	to := c.LocalAddr().(*net.UDPAddr)
	out := []ipv4.Message{
		{Buffers: [][]byte{[]byte("first")}, Addr: to},
		{Buffers: [][]byte{[]byte("x")}, Addr: &net.UDPAddr{IP: net.IPv6loopback, Port: 53}},
	}
	if n, err := r.c.WriteBatch(out, 0); n != 1 || err != nil {
		t.Fatalf("wrote %d, %v; want the first", n, err)
	}
	expectDatagram(t, c, "first")
}

// Readers of every socket look zones up at once: one name per index,
// whichever reader asks first (run under -race).
func TestZoneNames_concurrentReaders(t *testing.T) {
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Skipf("no loopback interface: %v", err)
	}
	var z zoneNames
	now := time.Now()
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Go(func() {
			for i := range 100 {
				// Past zoneKeep for half the calls: looked up again.
				at := now.Add(time.Duration(i%2) * 2 * zoneKeep)
				if got := z.zoneName(uint32(lo.Index), at); got != "lo" {
					t.Errorf("reader %d: %q, want lo", r, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

// expectDatagram waits (at most 5 s) for c's next datagram and fails
// unless it is want.
func expectDatagram(t *testing.T, c net.PacketConn, want string) {
	t.Helper()
	buf := make([]byte, len(want)+64)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, err := c.ReadFrom(buf); err != nil || string(buf[:n]) != want {
		t.Fatalf("got %q, %v; want %q", buf[:n], err, want)
	}
}
