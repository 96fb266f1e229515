package pathemu

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The round trip the tests emulate, and the margin a timing bound allows
// above the emulated cost: two shared cores and -race add scheduling noise,
// never less than the emulated delay. The margin stays under one round trip,
// so an extra round trip still fails; the round trip is long enough that the
// noise of a loaded machine (35 ms seen) fits under it.
const (
	testRTT    = 100 * time.Millisecond
	testMargin = 90 * time.Millisecond
)

// within fails unless got lies in [want, want+testMargin): the emulated
// path can only add delay, and a shortcut (a handshake for free) would land
// a whole round trip short.
func within(t *testing.T, what string, got, want time.Duration) {
	t.Helper()
	t.Logf("%s: %v (emulated %v)", what, got.Round(time.Millisecond), want)
	if got < want || got >= want+testMargin {
		t.Errorf("%s took %v, want %v to %v", what, got, want, want+testMargin)
	}
}

func startRelay(t *testing.T, target string, p Path) *Relay {
	t.Helper()
	r, err := Start("127.0.0.1:0", target, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// echoTCP serves a line echo on loopback until the test ends.
func echoTCP(t *testing.T, wrap func(net.Conn) net.Conn) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c = wrap(c)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func plain(c net.Conn) net.Conn { return c }

// A TCP connect costs one round trip and each exchange one more: the first
// echo arrives two round trips after the connect began, the second one
// round trip after it was sent.
func TestRelay_tcpConnectAndExchangeCostRoundTrips(t *testing.T) {
	r := startRelay(t, echoTCP(t, plain), Path{RTT: testRTT})
	start := time.Now()
	c, err := net.Dial("tcp", r.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	fmt.Fprintln(c, "one")
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	within(t, "connect and first exchange", time.Since(start), 2*testRTT)
	start = time.Now()
	fmt.Fprintln(c, "two")
	if _, err := rd.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	within(t, "second exchange", time.Since(start), testRTT)
}

// A TLS 1.3 handshake completes two round trips after the connect began (TCP,
// then TLS), and the first query's answer arrives one round trip later: the
// three round trips a real path charges (docs/design.md#lesson-round-trips).
func TestRelay_tlsHandshakeCostsItsRoundTrips(t *testing.T) {
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("relay.test")
	if err != nil {
		t.Fatal(err)
	}
	srvConf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	target := echoTCP(t, func(c net.Conn) net.Conn { return tls.Server(c, srvConf) })
	r := startRelay(t, target, Path{RTT: testRTT})

	start := time.Now()
	raw, err := net.Dial("tcp", r.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, &tls.Config{ServerName: "relay.test", RootCAs: ca.Pool()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, "TCP connect and TLS 1.3 handshake", time.Since(start), 2*testRTT)
	fmt.Fprintln(c, "query")
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	within(t, "connect, handshake and first query", time.Since(start), 3*testRTT)
}

// Jitter never reorders a TCP stream: every byte arrives, in order.
func TestRelay_tcpKeepsOrderUnderJitter(t *testing.T) {
	r := startRelay(t, echoTCP(t, plain), Path{RTT: 2 * time.Millisecond, Jitter: 5 * time.Millisecond})
	c, err := net.Dial("tcp", r.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 2000
	go func() {
		for i := range n {
			binary.Write(c, binary.BigEndian, uint32(i))
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := range n {
		var got uint32
		if err := binary.Read(c, binary.BigEndian, &got); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if got != uint32(i) {
			t.Fatalf("read %d where %d was due: the stream was reordered", got, i)
		}
	}
}

// The target's close reaches the client half a round trip later, as an EOF
// after every byte it sent.
func TestRelay_tcpCloseTravelsTheHalfRoundTrip(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		c.Write([]byte("bye"))
		c.Close()
	}()
	r := startRelay(t, l.Addr().String(), Path{RTT: testRTT})
	start := time.Now()
	c, err := net.Dial("tcp", r.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "bye" {
		t.Fatalf("read %q, %v; want \"bye\" then EOF", b, err)
	}
	// The SYN takes half a round trip, the bytes and the FIN another half.
	within(t, "connect, greeting and close", time.Since(start), testRTT)
}

// echoUDP echoes datagrams until the test ends.
func echoUDP(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	return c.LocalAddr().String()
}

// A UDP datagram and its answer cost one round trip; with Loss 1 nothing
// gets through, with Loss 0 everything does.
func TestRelay_udpRoundTripAndLoss(t *testing.T) {
	target := echoUDP(t)
	exchange := func(r *Relay, n int, wait time.Duration) (answered int, first time.Duration) {
		c, err := net.Dial("udp", r.Addr.String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		for i := range n {
			fmt.Fprintf(c, "d%d", i)
		}
		c.SetReadDeadline(time.Now().Add(wait))
		buf := make([]byte, 64)
		for answered < n {
			if _, err := c.Read(buf); err != nil {
				break
			}
			if answered == 0 {
				first = time.Since(start)
			}
			answered++
		}
		return answered, first
	}
	clean := startRelay(t, target, Path{RTT: testRTT})
	got, first := exchange(clean, 20, time.Second)
	if got != 20 {
		t.Errorf("lossless path: %d of 20 answered", got)
	}
	within(t, "UDP round trip", first, testRTT)
	dead := startRelay(t, target, Path{RTT: testRTT, Loss: 1})
	if got, _ := exchange(dead, 20, 3*testRTT); got != 0 {
		t.Errorf("path with loss 1: %d of 20 answered, want 0", got)
	}
}

func TestStart_rejectsBadPaths(t *testing.T) {
	for _, p := range []Path{{RTT: -1}, {Jitter: -1}, {Loss: -0.1}, {Loss: 1.5}} {
		if r, err := Start("127.0.0.1:0", "127.0.0.1:1", p); err == nil {
			r.Close()
			t.Errorf("Start(%+v) succeeded, want an error", p)
		}
	}
}

// A datagram to a target that is not listening (the kernel answers with an
// ICMP port unreachable) is lost, as on a real path, and the client's later
// datagrams still reach the target once it listens.
func TestRelay_udpSurvivesATargetThatWasDown(t *testing.T) {
	probe, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	target := probe.LocalAddr().(*net.UDPAddr)
	probe.Close() // the port is free: nothing listens there yet
	r := startRelay(t, target.String(), Path{RTT: 2 * time.Millisecond})
	c, err := net.Dial("udp", r.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "early")
	// The early datagram's refusal has come back to the relay: that is the scenario.
	testutil.WaitFor(t, "the target's refusal of the early datagram", 5*time.Second, func() bool { return r.UDPRefused() >= 1 })

	srv, err := net.ListenUDP("udp", target)
	if err != nil {
		t.Skipf("the freed port was taken meanwhile: %v", err)
	}
	defer srv.Close()
	go func() {
		buf := make([]byte, 64)
		for {
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			srv.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	buf := make([]byte, 64)
	for i := range 20 { // datagrams may be lost; a bounded number of tries
		fmt.Fprintf(c, "late%d", i)
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if n, err := c.Read(buf); err == nil && string(buf[:n]) != "early" {
			return
		}
	}
	t.Error("no answer through the relay after the target came up")
}

// failingListener fails its first n Accepts with EMFILE, as a process out
// of descriptors sees, then accepts as usual.
type failingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An accept error that passes (EMFILE) pauses the relay's accept loop, which
// then relays the next connection, instead of ending it for good.
func TestRelay_acceptErrorsPauseThenRelay(t *testing.T) {
	r := startRelay(t, echoTCP(t, plain), Path{})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: inner}
	fl.n.Store(3)
	r.wg.Go(func() { r.acceptLoop(fl) })
	t.Cleanup(func() { inner.Close() }) // before the relay's Close, which waits for the loop

	c, err := net.DialTimeout("tcp", inner.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("after emfile\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "after emfile\n" {
		t.Fatalf("after three EMFILE accepts: read %q, %v; want the echo", line, err)
	}
	if n := fl.n.Load(); n >= 0 {
		t.Errorf("the loop stopped retrying: %d failing accepts left", n+1)
	}
}
