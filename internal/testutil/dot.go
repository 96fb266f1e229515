package testutil

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/certs"
)

// handshakeTimeout bounds a server-side TLS handshake, so a client that
// connects and says nothing cannot hold a test's cleanup.
const handshakeTimeout = 5 * time.Second

// DoTServer is a loopback DNS-over-TLS server (RFC 7858). It answers the
// queries pipelined on a connection concurrently, each in its own goroutine,
// so a delayed answer delays only its own query — unlike miekg/dns's server,
// which works through one connection's queries in order.
type DoTServer struct {
	Addr netip.AddrPort // 127.0.0.1:port
	Name string         // the name on its certificate

	handler Handler
	tlsConf *tls.Config
	ln      net.Listener
	faults  faults
	delay   atomic.Int64 // nanoseconds before each answer

	accepts, handshakes, resumed, queries atomic.Int64

	wg     sync.WaitGroup
	mu     sync.Mutex // guards conns
	conns  map[*dotServerConn]struct{}
	closed bool
}

// dotServerConn is one client connection on the server side.
type dotServerConn struct {
	tc   *tls.Conn
	mu   sync.Mutex // guards busy and serialises writes: one frame at a time
	busy int        // queries read and not yet answered (or given up)
}

// StartDoT starts a DoT server on 127.0.0.1 whose certificate, issued by ca,
// carries name; h answers the queries. t.Cleanup stops it and waits for
// every goroutine it started.
func StartDoT(t testing.TB, ca *certs.CA, name string, h Handler) *DoTServer {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatalf("issue %s: %v", name, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &DoTServer{
		Addr:    ln.Addr().(*net.TCPAddr).AddrPort(),
		Name:    name,
		handler: h,
		tlsConf: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ln:      ln,
		conns:   make(map[*dotServerConn]struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.wg.Go(func() { s.serve(ctx) })
	t.Cleanup(func() {
		cancel()
		ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.tc.NetConn().Close() // no close_notify: do not block on a client that stopped reading
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// Accepts is the number of TCP connections accepted.
func (s *DoTServer) Accepts() int { return int(s.accepts.Load()) }

// Handshakes is the number of TLS handshakes completed.
func (s *DoTServer) Handshakes() int { return int(s.handshakes.Load()) }

// Resumed is the number of completed handshakes that resumed a session.
func (s *DoTServer) Resumed() int { return int(s.resumed.Load()) }

// Queries is the number of queries read, answered or not.
func (s *DoTServer) Queries() int { return int(s.queries.Load()) }

// SetDelay makes every later answer wait d (0: answer at once).
func (s *DoTServer) SetDelay(d time.Duration) { s.delay.Store(int64(d)) }

// FailNext makes the next query read, on any connection, suffer f. Calls
// queue: each fault applies to one query, in order.
func (s *DoTServer) FailNext(f Fault) { s.faults.push(f) }

// CloseIdle closes every connection with no query in progress, as an
// upstream enforcing an idle timeout does, and returns how many it closed.
func (s *DoTServer) CloseIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for c := range s.conns {
		// Under c.mu: an answer is either fully written or not begun, so a
		// client that has its answer sees this connection as idle too.
		c.mu.Lock()
		if c.busy == 0 {
			c.tc.Close()
			delete(s.conns, c)
			n++
		}
		c.mu.Unlock()
	}
	return n
}

func (s *DoTServer) serve(ctx context.Context) {
	for {
		raw, err := s.ln.Accept()
		if err != nil {
			return // the listener closed
		}
		s.accepts.Add(1)
		s.wg.Go(func() { s.serveConn(ctx, raw) })
	}
}

func (s *DoTServer) serveConn(ctx context.Context, raw net.Conn) {
	tc := tls.Server(raw, s.tlsConf)
	defer tc.Close()
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		return // a client that does not trust us, or went away
	}
	s.handshakes.Add(1)
	if tc.ConnectionState().DidResume {
		s.resumed.Add(1)
	}
	c := &dotServerConn{tc: tc}
	if !s.add(c) {
		return
	}
	defer s.remove(c)
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel() // ends this connection's handlers
	for {
		q, err := readFrame(tc)
		if err != nil {
			return
		}
		s.queries.Add(1)
		f := s.faults.take()
		switch f {
		case FaultCloseOnQuery:
			return
		case FaultPartialLength:
			c.mu.Lock()
			c.writeLocked([]byte{0})
			c.mu.Unlock()
			return
		default: // no fault, or one applied to the answer (mangle)
		}
		c.mu.Lock()
		c.busy++
		c.mu.Unlock()
		s.wg.Go(func() { c.finish(s.answer(cctx, q, f)) })
	}
}

// answer waits the configured delay, asks the handler and applies f.
func (s *DoTServer) answer(ctx context.Context, q *dns.Msg, f Fault) *dns.Msg {
	if d := time.Duration(s.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		}
	}
	r := s.handler(ctx, q)
	if r != nil {
		mangle(r, f)
	}
	return r
}

func (s *DoTServer) add(c *dotServerConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *DoTServer) remove(c *dotServerConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// readFrame reads one length-prefixed DNS message (RFC 1035 §4.2.2).
func readFrame(r io.Reader) (*dns.Msg, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	wire := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(r, wire); err != nil {
		return nil, err
	}
	q := new(dns.Msg)
	if err := q.Unpack(wire); err != nil {
		return nil, err
	}
	return q, nil
}

// finish ends one query: it sends the answer, if any, and stops counting
// the query as in progress, in one step.
func (c *dotServerConn) finish(r *dns.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy--
	if r == nil {
		return
	}
	wire, err := r.Pack()
	if err != nil {
		return
	}
	c.writeLocked(append(binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(wire)), uint16(len(wire))), wire...))
}

// writeLocked sends b in one call, so pipelined answers never interleave.
func (c *dotServerConn) writeLocked(b []byte) {
	c.tc.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	c.tc.Write(b)
}
