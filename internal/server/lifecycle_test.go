package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestSwap_newQueriesUseNewStateAndDrainedWaitsForOld(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	old := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		close(entered)
		<-release
		return answerA("192.0.2.1")(ctx, q)
	})
	s := startServer(t, state(old))
	c := dialUDP(t, udpAddr(s))
	inflight := newQuery("old.example.", dns.TypeA)
	if _, err := c.Write(mustPack(t, inflight)); err != nil {
		t.Fatal(err)
	}
	<-entered

	drained := s.Swap(state(answerA("192.0.2.2")))
	resp := exchange(t, "udp", udpAddr(s), newQuery("new.example.", dns.TypeA))
	if a := resp.Answer[0].(*dns.A).A.String(); a != "192.0.2.2" {
		t.Errorf("query after Swap answered %s, want the new state's 192.0.2.2", a)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if err := drained(done); err == nil {
		t.Fatal("drained returned nil while a query of the old state is in flight")
	}

	close(release)
	if resp := readUDPMsg(t, c); resp.Id != inflight.Id || resp.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Errorf("in-flight query answered %v, want the old state's 192.0.2.1", resp.Answer)
	}
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	if err := drained(ctx); err != nil {
		t.Errorf("drained after the old query finished: %v", err)
	}
}

func TestSwap_drainedReturnsAtOnceWhenIdle(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	exchange(t, "udp", udpAddr(s), newQuery("a.example.", dns.TypeA))
	// The query is recorded after its answer was sent: idle means that done.
	waitFor(t, "the answered query to finish", func() bool { return s.Snapshot().UDPInFlight == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a wait would fail
	if err := s.Swap(state(answerA("192.0.2.2")))(ctx); err != nil {
		t.Errorf("drained with nothing in flight: %v", err)
	}
}

func hasIPv6Loopback(t *testing.T) {
	t.Helper()
	c, err := net.ListenPacket("udp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	c.Close()
}

func TestListen_reconcilesAddresses(t *testing.T) {
	hasIPv6Loopback(t)
	s := New(Options{}, state(answerA("192.0.2.1")))
	defer s.Shutdown(context.Background())
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	u1, t1 := s.Addrs()

	if err := s.Listen([]string{"127.0.0.1:0", "[::1]:0"}); err != nil {
		t.Fatal(err)
	}
	u2, t2 := s.Addrs()
	if len(u2) != 2 || u2[0].String() != u1[0].String() || t2[0].String() != t1[0].String() {
		t.Fatalf("after adding ::1: %v %v; want the 127.0.0.1 sockets kept (%v %v) and one more", u2, t2, u1, t1)
	}
	exchange(t, "udp", u2[1].String(), newQuery("v6.example.", dns.TypeA))
	exchange(t, "tcp", t2[1].String(), newQuery("v6.example.", dns.TypeA))

	if err := s.Listen([]string{"[::1]:0"}); err != nil {
		t.Fatal(err)
	}
	u3, _ := s.Addrs()
	if len(u3) != 1 || u3[0].String() != u2[1].String() {
		t.Fatalf("after removing 127.0.0.1: %v, want only %v", u3, u2[1])
	}
	if c, err := net.Dial("tcp", t1[0].String()); err == nil {
		c.Close()
		t.Error("removed TCP listener still accepts")
	}
	client := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	waitFor(t, "the removed UDP socket to close", func() bool {
		_, _, err := client.Exchange(newQuery("a.example.", dns.TypeA), u1[0].String())
		return errors.Is(err, syscall.ECONNREFUSED)
	})
}

func TestListen_bindFailureNamesAddressAndKeepsServing(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s := startServer(t, state(answerA("192.0.2.1")))
	before, _ := s.Addrs()

	err = s.Listen([]string{"127.0.0.1:0", busy.LocalAddr().String()})
	if err == nil || !strings.Contains(err.Error(), busy.LocalAddr().String()) {
		t.Fatalf("Listen with a busy address: %v, want an error naming %s", err, busy.LocalAddr())
	}
	after, _ := s.Addrs()
	if len(after) != 1 || after[0].String() != before[0].String() {
		t.Errorf("listeners after a failed Listen: %v, want unchanged %v", after, before)
	}
	exchange(t, "udp", udpAddr(s), newQuery("a.example.", dns.TypeA))
}

func TestShutdown_drainsInFlightQueries(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		close(entered)
		<-release
		return answerA("192.0.2.1")(ctx, q)
	})
	s := New(Options{}, state(r))
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	addr := tcpAddr(s)
	c := dialTCP(t, addr)
	q := newQuery("a.example.", dns.TypeA)
	if err := c.WriteMsg(q); err != nil {
		t.Fatal(err)
	}
	<-entered

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- s.Shutdown(ctx)
	}()
	waitFor(t, "Shutdown to stop accepting", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	if resp := readMsg(t, c); resp.Id != q.Id || resp.Rcode != dns.RcodeSuccess {
		t.Errorf("in-flight query: id %d rcode %s, want its NOERROR answer", resp.Id, dns.RcodeToString[resp.Rcode])
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v, want nil (everything drained)", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection after Shutdown: read %v, want EOF", err)
	}
}

// When Shutdown's ctx ends first, the queries still running see their ctx
// cancelled and the clients get nothing — not even the SERVFAIL a resolver
// error without a Kind would otherwise produce.
func TestShutdown_cancelsAfterDeadlineAndAnswersNothing(t *testing.T) {
	entered := make(chan struct{}, 2)
	causes := make(chan error, 2)
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		entered <- struct{}{}
		<-ctx.Done()
		causes <- ctx.Err()
		return nil, "", ctx.Err()
	})
	s := New(Options{}, state(r))
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	addr := tcpAddr(s)
	tc, uc := dialTCP(t, addr), dialUDP(t, udpAddr(s))
	if err := tc.WriteMsg(newQuery("tcp.example.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if _, err := uc.Write(mustPack(t, newQuery("udp.example.", dns.TypeA))); err != nil {
		t.Fatal(err)
	}
	<-entered
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	waitFor(t, "Shutdown to stop accepting", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	cancel() // the drain deadline passes with both queries still running
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown: %v, want context.Canceled", err)
	}
	for range 2 {
		if err := <-causes; !errors.Is(err, context.Canceled) {
			t.Errorf("resolver ctx: %v, want cancelled", err)
		}
	}
	tc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := tc.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("TCP client: read %v, want EOF without an answer", err)
	}
	// Shutdown has returned: every answer that was going to be written has
	// been, and loopback delivers at once, so a short wait proves absence.
	uc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := uc.Read(make([]byte, 512)); !isTimeout(err) {
		t.Errorf("UDP client got %d bytes (err %v), want nothing", n, err)
	}
	if err := s.Listen([]string{"127.0.0.1:0"}); err == nil {
		t.Error("Listen after Shutdown succeeded")
	}
}

// The NixOS module's default is ["0.0.0.0:53", "[::]:53"]: both wildcards on
// one port. A dual-stack IPv6 socket would collide with the IPv4 one, so each
// family is bound on its own. Only loopback traffic is sent.
func TestListen_wildcardsOfBothFamiliesOnOnePort(t *testing.T) {
	hasIPv6Loopback(t)
	// A port free for UDP on 0.0.0.0 when probed may be taken for TCP or
	// IPv6 by a parallel test before Listen binds it; only that collision
	// is retried, with a fresh server and a fresh port.
	var port int
	for try := 0; ; try++ {
		probe, err := net.ListenPacket("udp4", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		port = probe.LocalAddr().(*net.UDPAddr).Port
		probe.Close()
		s := New(Options{}, state(answerA("192.0.2.1")))
		err = s.Listen([]string{fmt.Sprintf("0.0.0.0:%d", port), fmt.Sprintf("[::]:%d", port)})
		if err == nil {
			t.Cleanup(func() { s.Shutdown(context.Background()) })
			break
		}
		s.Shutdown(context.Background())
		if !errors.Is(err, syscall.EADDRINUSE) || try == 19 {
			t.Fatalf("binding both wildcards on port %d: %v", port, err)
		}
	}
	for _, addr := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("[::1]:%d", port)} {
		exchange(t, "udp", addr, newQuery("both.example.", dns.TypeA))
		exchange(t, "tcp", addr, newQuery("both.example.", dns.TypeA))
	}
}
