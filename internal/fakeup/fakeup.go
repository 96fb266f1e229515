// Package fakeup is a fake upstream resolver for the scenario tests: DNS over
// UDP, TCP, TLS and HTTPS on loopback or a VM network, answering any name with
// a deterministic synthetic address, and misbehaving on request (latency,
// stalls, slow handshakes, idle closes, truncation, refusals) so the field
// failures of docs/design.md#field-failures can be reproduced on demand. It counts what it saw, so
// a scenario can assert on connections and handshakes as well as answers.
//
// cmd/nxdns-fakeup is its command-line face; a Go scenario test can Start one
// in-process instead. Everything it holds is bounded: connections per
// listener, queries in flight per connection and per UDP socket, every wait.
package fakeup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
)

// DefaultCertNames are the names the leaf certificate carries unless told
// otherwise: enough for a loopback client to verify by name or by address.
var DefaultCertNames = []string{"localhost", "127.0.0.1", "::1"}

// DefaultTTL of synthetic answers: long enough that a cache in front would
// keep them for a whole scenario, so a repeated name proves a cache hit.
const DefaultTTL = 300

// headerTimeout bounds the counters endpoint's and DoH's request headers, so
// a silent client cannot hold a goroutine forever.
const headerTimeout = 10 * time.Second

// Config is what Start needs.
type Config struct {
	Listen    []Listen  // at least one
	CA        *certs.CA // issues the leaf certificate; required with a dot or doh listener
	CertNames []string  // names and IPs of the leaf; empty means DefaultCertNames
	TTL       uint32    // of synthetic answers; 0 means DefaultTTL
	HTTP      string    // host:port for /counters and /healthz; empty serves none
	Log       io.Writer // one line per listener at start; nil discards

	// delay, when set, overrides a listener's latency for the names it
	// accepts. Tests use it to force answers out of order on one connection.
	delay func(qname string) (time.Duration, bool)
}

// Server is a running fake upstream. Close stops it.
type Server struct {
	cfg       Config
	listeners []*listener
	httpLn    net.Listener
	httpSrv   *http.Server
	ctx       context.Context // cancelled by Close: ends every wait and every stall
	cancel    context.CancelFunc
	wg        sync.WaitGroup // every goroutine the server started
	closeOnce sync.Once

	mu     sync.Mutex            // guards the fields below
	conns  map[net.Conn]struct{} // open connections, closed by Close
	closed bool                  // Close has begun: a new connection is closed at once
}

// Bound is one listener as started: where it listens and its counters key.
type Bound struct {
	Transport Transport
	Addr      net.Addr
	Key       string
}

// Start binds every listener (and the counters endpoint) and serves them. A
// bind failure closes whatever was bound and returns the error, so a caller
// never gets half a server.
func Start(cfg Config) (*Server, error) {
	if len(cfg.Listen) == 0 {
		return nil, errors.New("fakeup: no listeners")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if len(cfg.CertNames) == 0 {
		cfg.CertNames = DefaultCertNames
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	leaf, err := issueLeaf(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, ctx: ctx, cancel: cancel, conns: make(map[net.Conn]struct{})}
	if err := s.bind(leaf); err != nil {
		s.Close()
		return nil, err
	}
	for _, l := range s.listeners {
		l.start()
		fmt.Fprintln(cfg.Log, l.startLine())
	}
	if s.httpSrv != nil {
		s.wg.Go(func() { s.httpSrv.Serve(s.httpLn) })
		fmt.Fprintf(cfg.Log, "counters http://%s/counters\n", s.httpLn.Addr())
	}
	return s, nil
}

// issueLeaf makes the one leaf certificate every TLS listener presents, or
// nothing when no listener needs it.
func issueLeaf(cfg Config) (*tls.Certificate, error) {
	needTLS := false
	for _, l := range cfg.Listen {
		needTLS = needTLS || l.Transport == DoT || l.Transport == DoH || l.Transport == DoQ
	}
	if !needTLS {
		return nil, nil
	}
	if cfg.CA == nil {
		return nil, errors.New("fakeup: a dot or doh listener needs a CA")
	}
	leaf, err := cfg.CA.Issue(cfg.CertNames...)
	if err != nil {
		return nil, fmt.Errorf("fakeup: issue certificate for %s: %w", strings.Join(cfg.CertNames, ","), err)
	}
	return &leaf, nil
}

func (s *Server) bind(leaf *tls.Certificate) error {
	for _, spec := range s.cfg.Listen {
		l, err := newListener(s, spec, leaf)
		if err != nil {
			return err
		}
		s.listeners = append(s.listeners, l)
	}
	if s.cfg.HTTP == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.HTTP)
	if err != nil {
		return fmt.Errorf("fakeup: counters endpoint: %w", err)
	}
	s.httpLn = ln
	s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: headerTimeout}
	return nil
}

// Listeners describes the listeners in -listen order, with the addresses
// actually bound (a port 0 resolved).
func (s *Server) Listeners() []Bound {
	out := make([]Bound, len(s.listeners))
	for i, l := range s.listeners {
		out[i] = Bound{Transport: l.Transport, Addr: l.addr(), Key: l.key}
	}
	return out
}

// CloseIdle closes every TCP and DoT connection owing no answer, as an
// upstream enforcing an idle timeout does, and returns how many it closed.
func (s *Server) CloseIdle() int {
	n := 0
	for _, l := range s.listeners {
		n += l.sessions.closeIdle()
	}
	return n
}

// CloseConnections closes every open connection, busy or idle (a DoH
// server dropping its clients).
func (s *Server) CloseConnections() { s.closeConns(false) }

// closeConns closes every open connection; final also marks the server
// closed under the same lock, so track refuses any connection after it.
func (s *Server) closeConns(final bool) {
	s.mu.Lock()
	if final {
		s.closed = true
	}
	open := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		open = append(open, c)
	}
	s.mu.Unlock()
	// Close outside the lock: a TLS close writes close_notify and can
	// block on a dead peer for its write deadline.
	for _, c := range open {
		c.Close()
	}
}

// HTTPAddr is the counters endpoint's address, nil when there is none.
func (s *Server) HTTPAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// Close stops accepting, ends every wait and stall, closes every connection
// and returns once every goroutine the server started has finished. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		for _, l := range s.listeners {
			l.close()
		}
		if s.httpSrv != nil {
			s.httpSrv.Close()
		}
		s.closeConns(true)
		s.wg.Wait()
		for _, l := range s.listeners {
			l.closeTransport()
		}
	})
	return nil
}

// trackedConn is an accepted connection the server can close at shutdown.
// Closing it, by whoever (a session, net/http, a failed handshake, Close),
// forgets it and returns its listener's connection slot exactly once.
type trackedConn struct {
	net.Conn
	s       *Server
	release func()
	once    sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.release()
	})
	return c.Conn.Close()
}

// track registers c for closing at shutdown; release runs when it closes.
// After Close has begun it closes c and returns nil: the connection raced
// the shutdown and lost.
func (s *Server) track(c net.Conn, release func()) net.Conn {
	t := &trackedConn{Conn: c, s: s, release: release}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		release()
		return nil
	}
	s.conns[t] = struct{}{}
	s.mu.Unlock()
	return t
}

// delay is how long the answer to q waits: latency plus a uniform jitter.
func (l *listener) delay(q *dns.Msg) time.Duration {
	if f := l.s.cfg.delay; f != nil && q != nil && len(q.Question) == 1 {
		if d, ok := f(q.Question[0].Name); ok {
			return d
		}
	}
	d := l.Behaviour.Latency
	if j := l.Behaviour.Jitter; j > 0 {
		d += rand.N(j + 1)
	}
	return d
}
