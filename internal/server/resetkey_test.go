package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The secret is created on first use (32 bytes, mode 0600) and the same
// one is read back at the next start, with nothing logged at error level.
func TestQUICResetSecret_createdMode0600AndReusedAtTheNextStart(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zapcore.ErrorLevel)
	first := LoadQUICResetSecret(dir, zap.New(core))
	if first == nil {
		t.Fatal("no secret with a state directory")
	}
	path := filepath.Join(dir, QUICResetKeyFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Errorf("%s: mode %v, %d bytes; want 0600, 32", path, st.Mode().Perm(), st.Size())
	}
	if b, _ := os.ReadFile(path); !bytes.Equal(b, first[:]) {
		t.Error("the file does not hold the secret returned")
	}
	second := LoadQUICResetSecret(dir, zap.New(core))
	if second == nil || *second != *first {
		t.Error("the next start has another secret: resets would not survive the restart")
	}
	if *first == (QUICResetSecret{}) {
		t.Error("the secret is all zeros")
	}
	if n := logs.Len(); n != 0 {
		t.Errorf("%d error lines for a good state directory: %v", n, logs.All())
	}
}

// A file of the wrong size, too short or too long, and one that cannot be
// read (a FIFO) are replaced by a fresh 32-byte secret, mode 0600, with one
// error line naming the file and what was wrong, and never the secret.
func TestQUICResetSecret_badFileIsReplacedWithOneErrorLine(t *testing.T) {
	for _, tc := range []struct {
		name, problem string
		make          func(path string) error
	}{
		{"short", "16 bytes, want 32", func(p string) error { return os.WriteFile(p, make([]byte, 16), 0o644) }},
		{"long", "over 64 bytes, want 32", func(p string) error { return os.WriteFile(p, make([]byte, 4096), 0o644) }},
		{"fifo", "not a regular file", func(p string) error { return syscall.Mkfifo(p, 0o600) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, QUICResetKeyFile)
			if err := tc.make(path); err != nil {
				t.Fatal(err)
			}
			core, logs := observer.New(zapcore.InfoLevel)
			sec := LoadQUICResetSecret(dir, zap.New(core))
			if sec == nil {
				t.Fatal("no secret after replacing a bad file")
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || st.Size() != 32 {
				t.Errorf("replaced by %v, %d bytes; want a regular file, 0600, 32 bytes", st.Mode(), st.Size())
			}
			if again := LoadQUICResetSecret(dir, zap.NewNop()); again == nil || *again != *sec {
				t.Error("the replacement is not what the next start reads")
			}
			entries := logs.All()
			if len(entries) != 1 || entries[0].Level != zapcore.ErrorLevel {
				t.Fatalf("want one error line, got %v", entries)
			}
			line := fmt.Sprint(entries[0].Message, entries[0].ContextMap())
			if !strings.Contains(line, path) || !strings.Contains(line, tc.problem) {
				t.Errorf("the line %q does not name %s and %q", line, path, tc.problem)
			}
			if strings.Contains(line, hex.EncodeToString(sec[:])) || strings.Contains(line, string(sec[:])) {
				t.Error("the line carries the secret")
			}
		})
	}
}

// Without a state directory there is no secret, as before; a directory that
// does not exist gives none either (a secret that cannot be kept would not
// outlive the restart it is for), with an error line naming the file.
func TestQUICResetSecret_noneWithoutAStateDirOrWhenItCannotBeWritten(t *testing.T) {
	if LoadQUICResetSecret("", nil) != nil {
		t.Error("a secret without a state directory")
	}
	missing := filepath.Join(t.TempDir(), "absent")
	core, logs := observer.New(zapcore.ErrorLevel)
	if LoadQUICResetSecret(missing, zap.New(core)) != nil {
		t.Error("a secret that was not written")
	}
	if e := logs.All(); len(e) != 1 || !strings.Contains(e[0].ContextMap()["file"].(string), missing) {
		t.Errorf("want one error line naming the file, got %v", e)
	}
}

// Each listener's key is its own (RFC 9000 §10.3.2): the same front at the
// same address gets the same key from the same secret, and another front,
// another address or another secret gets another.
func TestQUICResetKey_oneKeyPerListenerStableAcrossStarts(t *testing.T) {
	var a, b QUICResetSecret
	rand.Read(a[:])
	rand.Read(b[:])
	at := func(s string) net.Addr { return net.UDPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	k := *quicResetKey(&a, "DoQ", at("192.0.2.1:853"))
	if *quicResetKey(&a, "DoQ", at("192.0.2.1:853")) != k {
		t.Error("the same listener's key differs between two derivations")
	}
	for name, other := range map[string]*quic.StatelessResetKey{
		"front":   quicResetKey(&a, "DoH3", at("192.0.2.1:853")),
		"address": quicResetKey(&a, "DoQ", at("192.0.2.1:8853")),
		"secret":  quicResetKey(&b, "DoQ", at("192.0.2.1:853")),
	} {
		if *other == k {
			t.Errorf("another %s, the same key", name)
		}
	}
	if quicResetKey(nil, "DoQ", at("192.0.2.1:853")) != nil {
		t.Error("a key without a secret")
	}
}

// quicFront is one of the served QUIC fronts, for the restart tests.
type quicFront struct {
	name, alpn string
	listen     func(*Server, []string) error
	addrs      func(*Server) []net.Addr
}

var quicFronts = []quicFront{
	{"DoQ", "doq", (*Server).ListenDoQ, (*Server).DoQAddrs},
	{"DoH3", http3.NextProtoH3, (*Server).ListenDoH3, (*Server).DoH3Addrs},
}

// startQUICFront serves f at addr with filter.state_dir dir.
func startQUICFront(t *testing.T, p *testPKI, f quicFront, dir, addr string) netip.AddrPort {
	t.Helper()
	s := startTLSServer(t, state(answerA("192.0.2.9")), p, func(s *Server) { s.stateDir = dir })
	if err := f.listen(s, []string{addr}); err != nil {
		t.Fatal(err)
	}
	return netip.MustParseAddrPort(f.addrs(s)[0].String())
}

// crashQUIC closes the sockets of s's QUIC listeners and nothing else, as a
// process that is killed (or loses power) leaves them: no CONNECTION_CLOSE
// reaches a client, which is when its connection is left to the stateless
// reset or its idle timeout. (A clean Shutdown tells each client first;
// doqListener.close.) The rest of s is shut down at cleanup.
func crashQUIC(s *Server) {
	for _, d := range []*doqFront{&s.doq, &s.tls.doh3} {
		d.mu.Lock()
		for _, l := range d.ls {
			l.udp.Close()
		}
		d.mu.Unlock()
	}
}

// crashedFront starts f, connects a quic-go client with idle timeout idle
// and has a query answered on it, crashes the server, and starts another on
// the same port with state directory next: the restart. It returns the
// client's connection, not yet told anything, and the port.
//
// The answered query is what makes the client's handshake confirmed (RFC
// 9001 §4.1.2). Dial returns once the client has sent its Finished; if the
// crash comes before the server has acknowledged it, the client keeps
// resending that Finished in long-header packets, its stream data coalesced
// behind them, and a listener that never had the connection drops such a
// datagram whole without a reset: the test would be measuring a handshake
// cut short, not the key.
func crashedFront(t *testing.T, f quicFront, dir, next string, idle time.Duration) (*quic.Conn, netip.AddrPort) {
	t.Helper()
	p := newTestPKI(t)
	var old *Server
	s := startTLSServer(t, state(answerA("192.0.2.9")), p, func(s *Server) { s.stateDir = dir; old = s })
	if err := f.listen(s, []string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(f.addrs(s)[0].String())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf := p.clientConf.Clone()
	conf.NextProtos = []string{f.alpn}
	c, err := quic.DialAddr(ctx, addr.String(), conf, &quic.Config{MaxIdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	if f.alpn == "doq" {
		doqAsk(t, c, "before.example.", 0)
	} else {
		doh3Ask(t, c, addr, "before.example.")
	}
	crashQUIC(old)
	startQUICFront(t, p, f, next, addr.String())
	return c, addr
}

// doh3Ask has one query for name answered over HTTP/3 on c, by quic-go's
// own HTTP/3 client.
func doh3Ask(t *testing.T, c *quic.Conn, addr netip.AddrPort, name string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, doh3URL(addr), bytes.NewReader(mustPack(t, tlsQuery(name))))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", dohContentType)
	resp, err := (&http3.Transport{}).NewClientConn(c).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if m := dohAnswer(t, resp); len(m.Answer) != 1 {
		t.Fatalf("%s: answer %v", name, m)
	}
}

// sendOn opens a stream on c and writes to it: a packet to the server on
// c's connection ID, as a client's next query after the restart sends.
func sendOn(t *testing.T, c *quic.Conn) {
	t.Helper()
	st, err := c.OpenStream()
	if err != nil {
		t.Fatalf("the connection ended before the restart: %v", context.Cause(c.Context()))
	}
	st.Write(make([]byte, 64)) // a DoQ query's length: the packet is well over the 42 octets a reset needs
}

// After a restart with the same state directory, the new process answers
// the old connection's next packet with a stateless reset (RFC 9000 §10.3)
// that the client recognises: the connection ends with
// quic.StatelessResetError within a few round trips, long before its idle
// timeout (the client asks for 30 s; nxdns's 10 s is the one in force).
func TestQUIC_restartWithTheSameStateDirResetsOldConnectionsAtOnce(t *testing.T) {
	for _, f := range quicFronts {
		t.Run(f.name, func(t *testing.T) {
			dir := t.TempDir()
			c, _ := crashedFront(t, f, dir, dir, 30*time.Second)
			start := time.Now()
			sendOn(t, c)
			const bound = 3 * time.Second // under a third of the idle timeout in force (doqIdleTimeout)
			select {
			case <-c.Context().Done():
			case <-time.After(bound):
				t.Fatalf("the connection is still up %v after the restart", bound)
			}
			var reset *quic.StatelessResetError
			if err := context.Cause(c.Context()); !errors.As(err, &reset) {
				t.Fatalf("the connection ended with %v (%T), want a stateless reset", err, err)
			}
			t.Logf("reset after %v", time.Since(start))
		})
	}
}

// With another state directory (so another key) the new process's resets
// carry tokens the client was never given, and it ignores them (RFC 9000
// §10.3.1): the connection ends only by its idle timeout, as every
// connection did before the key was kept. The new process does send
// resets, to a raw packet as to the client's: the difference is the key.
func TestQUIC_restartWithAnotherKeyLeavesOldConnectionsToTheirIdleTimeout(t *testing.T) {
	for _, f := range quicFronts {
		t.Run(f.name, func(t *testing.T) {
			c, addr := crashedFront(t, f, t.TempDir(), t.TempDir(), 2*time.Second)
			sendOn(t, c)
			select {
			case <-c.Context().Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the connection outlived its 2 s idle timeout by 8 s")
			}
			err := context.Cause(c.Context())
			var reset *quic.StatelessResetError
			var idle *quic.IdleTimeoutError
			if errors.As(err, &reset) || !errors.As(err, &idle) {
				t.Fatalf("the connection ended with %v (%T), want its idle timeout", err, err)
			}
			sock := rawQUICSocket(t, addr)
			if _, err := sock.Write(shortHeaderPacket(60)); err != nil {
				t.Fatal(err)
			}
			if r := readDatagram(t, sock); len(r) >= 60 {
				t.Errorf("a %d-byte reply to a 60-byte packet", len(r))
			}
		})
	}
}

// shortHeaderPacket is size random bytes with a short header's first bits
// (RFC 9000 §17.3): to a listener, a packet of a connection it never had.
func shortHeaderPacket(size int) []byte {
	b := make([]byte, size)
	rand.Read(b)
	b[0] = 0x40 | b[0]&0x3f
	return b
}

// With a key, a packet for a connection the listener never had is answered
// with a stateless reset smaller than itself, so nothing is amplified and
// two endpoints cannot bounce resets for ever (RFC 9000 §10.3, §10.3.3);
// packets of 42 octets or less, which a reset may be, get no answer at all.
// The small ones go first from a socket of their own; the reply to a large
// packet sent after them from another socket shows the listener has dealt
// with them, and anything they got was in their socket's queue by then
// (loopback delivers at the send).
func TestQUIC_statelessResetsAreSmallerThanTheirTrigger(t *testing.T) {
	for _, f := range quicFronts {
		t.Run(f.name, func(t *testing.T) {
			addr := startQUICFront(t, newTestPKI(t), f, t.TempDir(), "127.0.0.1:0")
			small, large := rawQUICSocket(t, addr), rawQUICSocket(t, addr)
			for size := 21; size <= 42; size++ {
				if _, err := small.Write(shortHeaderPacket(size)); err != nil {
					t.Fatal(err)
				}
			}
			for _, size := range []int{43, 60, 200, 1200} {
				if _, err := large.Write(shortHeaderPacket(size)); err != nil {
					t.Fatal(err)
				}
				r := readDatagram(t, large)
				if len(r) >= size || r[0]&0x80 != 0 {
					t.Errorf("a %d-byte packet got a %d-byte reply (first byte %#x), want a smaller short-header one", size, len(r), r[0])
				}
			}
			if n, ok := readQueued(t, small, make([]byte, 2048)); ok {
				t.Errorf("a packet of 42 octets or less got a %d-byte reply", n)
			}
		})
	}
}

// A flood of packets for unknown connections at a listener with a key costs
// the clients nothing (the next DoQ query is answered), and what it gets
// back is resets of 42 octets for 60-octet packets: less than it sent.
func TestDoQ_floodWithAKeyGetsSmallerResetsAndQueriesAreAnswered(t *testing.T) {
	p := newTestPKI(t)
	addr := startQUICFront(t, p, quicFronts[0], t.TempDir(), "127.0.0.1:0")
	sock := rawQUICSocket(t, addr)
	const flood, size = 5000, 60
	for range flood {
		if _, err := sock.Write(shortHeaderPacket(size)); err != nil {
			t.Fatal(err)
		}
	}
	doqMustAnswer(t, p, addr)
	buf, got := make([]byte, 2048), 0
	for { // what has arrived by now; the bound holds for any part of it
		n, ok := readQueued(t, sock, buf)
		if !ok {
			break
		}
		if n >= size {
			t.Fatalf("a %d-byte reply to a %d-byte packet", n, size)
		}
		got++
	}
	if got > flood {
		t.Errorf("%d replies to %d packets", got, flood)
	}
	t.Logf("%d resets to %d packets", got, flood)
}

// readQueued reads a datagram already in sock's receive queue, without
// waiting: false when there is none. (A read deadline in the past would
// not do: Go checks it before looking at the queue.)
func readQueued(t *testing.T, sock *net.UDPConn, buf []byte) (int, bool) {
	t.Helper()
	rc, err := sock.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if errors.Is(rerr, syscall.EAGAIN) {
		return 0, false
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
	return n, true
}
