package fakeup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/sleep"
)

// Compiled bounds on what one listener holds.
const (
	// maxConns per stream listener: beyond it the accept loop waits for a
	// connection to end, and new clients queue in the kernel's backlog, as a
	// saturated real server's would.
	maxConns = 1024
	// handshakeTimeout bounds a TLS handshake once it starts (handshake_delay
	// comes before it and is not counted), so a client that connects and says
	// nothing does not hold a connection slot forever.
	handshakeTimeout = 10 * time.Second
	// writeTimeout bounds one reply's write, so a client that stops reading
	// cannot block the connection's writer, and through it every answer.
	writeTimeout = 10 * time.Second
	// acceptBackoffMax caps the pause after a failing Accept (EMFILE), as
	// net/http does, so the loop neither spins nor gives up.
	acceptBackoffMax = time.Second
)

// listener is one -listen URL, bound.
type listener struct {
	Listen
	s        *Server
	key      string // counters key
	counters counters
	ln       net.Listener    // tcp, dot, doh
	pc       net.PacketConn  // udp
	tlsConf  *tls.Config     // dot, doh, doq
	qln      quicListener    // doq
	qtr      *quic.Transport // doq: qln's, closed after the server's goroutines (closeTransport)
	doh      *http.Server    // doh
	handoff  *connQueue      // doh: connections past their handshake, for net/http
	sessions sessionSet      // tcp, dot: open sessions, for CloseIdle
}

func newListener(s *Server, spec Listen, leaf *tls.Certificate) (*listener, error) {
	l := &listener{Listen: spec, s: s}
	var err error
	switch spec.Transport {
	case UDP:
		l.pc, err = net.ListenPacket("udp", spec.Addr)
	case DoQ:
		l.tlsConf = serverTLS(leaf, "doq") // RFC 9250 §4.1.1
		err = l.listenDoQ()
	default:
		l.ln, err = net.Listen("tcp", spec.Addr)
	}
	if err != nil {
		return nil, fmt.Errorf("fakeup: %s: %w", spec.Transport, err)
	}
	l.key = spec.key(l.addr())
	switch spec.Transport {
	case DoT:
		// RFC 7858 §3.2 registers the ALPN "dot"; a client that offers none
		// is served too.
		l.tlsConf = serverTLS(leaf, "dot")
	case DoH:
		l.tlsConf = serverTLS(leaf, "h2", "http/1.1")
		l.setupDoH()
	default: // UDP and TCP: plain DNS, no TLS
	}
	return l, nil
}

func serverTLS(leaf *tls.Certificate, protos ...string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{*leaf},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   protos,
	}
}

func (l *listener) addr() net.Addr {
	if l.pc != nil {
		return l.pc.LocalAddr()
	}
	if l.qln != nil {
		return l.qln.Addr()
	}
	return l.ln.Addr()
}

// startLine is the start-up log line: "listening dot 127.0.0.1:8853 latency=30ms".
func (l *listener) startLine() string {
	where := l.addr().String()
	if l.Transport == DoH {
		where += l.Path
	}
	line := fmt.Sprintf("listening %s %s", l.Transport, where)
	if b := l.Behaviour.String(); b != "" {
		line += " " + b
	}
	return line
}

func (l *listener) start() {
	switch l.Transport {
	case UDP:
		l.s.wg.Go(l.serveUDP)
	case TCP:
		l.s.wg.Go(func() { l.acceptLoop(l.serveStream) })
	case DoT:
		l.s.wg.Go(func() {
			l.acceptLoop(func(c net.Conn) {
				if tc := l.handshake(c); tc != nil {
					l.serveStream(tc)
				}
			})
		})
	case DoH:
		l.s.wg.Go(func() { l.acceptLoop(l.handOff) })
		l.s.wg.Go(func() { l.doh.Serve(l.handoff) })
	case DoQ:
		l.s.wg.Go(l.serveDoQ)
	}
}

func (l *listener) close() {
	if l.pc != nil {
		l.pc.Close()
	}
	if l.ln != nil {
		l.ln.Close()
	}
	if l.doh != nil {
		l.doh.Close()
	}
	if l.qln != nil {
		l.qln.Close()
	}
}

// closeTransport closes the DoQ listener's Transport and its socket, once
// the server's goroutines have ended.
func (l *listener) closeTransport() {
	if l.qtr != nil {
		l.qtr.Close()
		l.qtr.Conn.Close()
	}
}

// acceptLoop accepts connections, at most maxConns open at a time, and
// serves each on its own goroutine until the listener closes. serve owns the
// connection and must close it, or hand it to an owner that will (DoH):
// the slot is returned when the connection closes, not when serve returns.
func (l *listener) acceptLoop(serve func(net.Conn)) {
	slots := make(chan struct{}, maxConns)
	backoff := time.Duration(0)
	for {
		select {
		case slots <- struct{}{}:
		case <-l.s.ctx.Done():
			return
		}
		c, err := l.ln.Accept()
		if err != nil {
			<-slots
			if !l.retry(err, &backoff) {
				return
			}
			continue
		}
		backoff = 0
		l.counters.connections.Add(1)
		tc := l.s.track(c, func() { <-slots })
		if tc == nil {
			return
		}
		l.s.wg.Go(func() { serve(tc) })
	}
}

// handshake waits handshake_delay, then runs the TLS handshake under
// handshakeTimeout. It returns nil, with c closed, when either fails or the
// server closes first.
func (l *listener) handshake(c net.Conn) *tls.Conn {
	if !sleep.For(l.s.ctx, l.Behaviour.HandshakeDelay) {
		c.Close()
		return nil
	}
	ctx, cancel := context.WithTimeout(l.s.ctx, handshakeTimeout)
	defer cancel()
	tc := tls.Server(c, l.tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil
	}
	l.counters.handshakes.Add(1)
	if tc.ConnectionState().DidResume {
		l.counters.resumed.Add(1)
	}
	return tc
}

// retry is what a loop does after its Accept or read failed with err: it
// reports false when the listener is closing, and otherwise waits *backoff,
// doubled from 5 ms up to acceptBackoffMax, and reports whether the loop
// should go on.
func (l *listener) retry(err error, backoff *time.Duration) bool {
	if errors.Is(err, net.ErrClosed) || l.s.ctx.Err() != nil {
		return false
	}
	*backoff = min(max(2**backoff, 5*time.Millisecond), acceptBackoffMax)
	return sleep.For(l.s.ctx, *backoff)
}
