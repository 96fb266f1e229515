package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go/http3"
	"go.uber.org/zap"
)

// The TLS front ends (docs/design.md#tls-serving): DoT (dot.go) and DoH (doh.go) listeners.
// Each is a listener (listen.go) without a UDP socket, so reconciling on
// reload, stopping, draining and Shutdown treat them like plain ones; their
// connections share the plain TCP per-family cap, the per-client share of
// it and the access list, all applied at accept, before a handshake costs
// anything.

// tlsHandshakeTimeout bounds a TLS handshake, from accept to the first byte
// of DNS: a LAN handshake takes milliseconds, a phone waking its radio a
// second; a client that stalls longer (or never sends a ClientHello) is cut
// off and counted, and its connection slot freed.
const tlsHandshakeTimeout = 5 * time.Second

// CertSource is the serving certificate, read at every handshake
// (tlscert.Store: a renewal is picked up by new handshakes, and connections
// already open keep theirs). It must return at once.
type CertSource interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// tlsFront is the Server's state for DoT and DoH.
type tlsFront struct {
	dot, doh []*listener // the current ones, in ListenTLS order; under Server.mu

	certs            atomic.Pointer[certHolder]
	dotConf, dohConf *tls.Config // built once by the first ListenTLS; certs read through certs
	stats            tlsCounters

	handshake time.Duration // 0 means tlsHandshakeTimeout; tests shorten it before ListenTLS

	doh3   doqFront               // DoH over HTTP/3 listeners (doh3.go)
	h3     *http3.Server          // serves doh3's connections; built by the first ListenDoH3
	altSvc atomic.Pointer[string] // the Alt-Svc header of DoH/2 answers while doh3 serves; nil: none
}

type certHolder struct{ src CertSource }

// frontCounters are one front end's connection outcomes.
type frontCounters struct {
	refusedNotAllowed atomic.Uint64 // peer outside dns.allow: closed at accept
	refusedShare      atomic.Uint64 // the client already holds its share of the TCP cap
	refusedCapacity   atomic.Uint64 // over the TCP per-family cap: closed at accept
	handshakeTimeout  atomic.Uint64 // no completed handshake within the bound
	handshakeFailed   atomic.Uint64 // a failed handshake: garbage, TLS < 1.2, no shared cipher
}

type tlsCounters struct {
	dot, doh  frontCounters
	dohStatus [len(dohStatuses)]atomic.Uint64 // error answers by status (doh.go)
}

var errNoCertificate = errors.New("no serving certificate")

// ListenTLS makes the DoT and DoH listeners match dot and doh (host:port
// each), as Listen does for plain ones: kept addresses stay untouched, new
// ones are bound before anything is removed, and a failure changes nothing.
// certs replaces the certificate source for every handshake from now on
// (nil keeps the current one; it is required when a list is not empty).
func (s *Server) ListenTLS(dot, doh []string, certs CertSource) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server: listen after shutdown")
	}
	if certs != nil {
		s.tls.certs.Store(&certHolder{certs})
	}
	if len(dot)+len(doh) > 0 && s.tls.certs.Load() == nil {
		return errors.New("server: DoT/DoH listeners need a certificate")
	}
	if s.tls.dotConf == nil {
		// ALPN per RFC 9461's registrations: "dot" for DoT; HTTP/2 first for
		// DoH (RFC 8484 §5.2 recommends it), HTTP/1.1 for older clients.
		s.tls.dotConf = s.tlsConfig("dot")
		s.tls.dohConf = s.tlsConfig("h2", "http/1.1")
	}
	nextDoT, freshDoT, goneDoT, err := plan(s.tls.dot, dot, bindTLS)
	if err != nil {
		return err
	}
	nextDoH, freshDoH, goneDoH, err := plan(s.tls.doh, doh, bindTLS)
	if err != nil {
		for _, l := range freshDoT {
			l.closeSockets()
		}
		return err
	}
	for _, l := range append(goneDoT, goneDoH...) {
		s.retire(l)
	}
	for _, l := range freshDoT {
		s.live[l] = struct{}{}
		l.wg.Go(func() { s.acceptTCP(l, s.admitDoT) })
	}
	for _, l := range freshDoH {
		s.startDoH(l)
	}
	s.tls.dot, s.tls.doh = nextDoT, nextDoH
	return nil
}

// plan works out how to go from the listeners cur to the addresses addrs:
// the listeners to keep or bind, in addrs order (next), those bound now
// (fresh, not started), and those no longer listed (gone). On a bind
// failure it closes what it bound and returns the error naming the address.
func plan(cur []*listener, addrs []string, bind func(string) (*listener, error)) (next, fresh, gone []*listener, err error) {
	current := make(map[string]*listener, len(cur))
	for _, l := range cur {
		current[l.addr] = l
	}
	for _, a := range addrs {
		if l, ok := current[a]; ok {
			next = append(next, l)
			delete(current, a)
			continue
		}
		if seen(next, a) {
			continue // a duplicate; config validation reports it
		}
		l, err := bind(a)
		if err != nil {
			for _, f := range fresh {
				f.closeSockets()
			}
			return nil, nil, nil, err
		}
		fresh = append(fresh, l)
		next = append(next, l)
	}
	for _, l := range cur { // what is left was not listed, in cur's order
		if _, ok := current[l.addr]; ok {
			gone = append(gone, l)
		}
	}
	return next, fresh, gone, nil
}

// bindTLS opens the TCP socket of a DoT or DoH address, on its own family
// as bind does. The error names addr.
func bindTLS(addr string) (*listener, error) {
	network := "tcp4"
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6() {
		network = "tcp6"
	}
	var lc net.ListenConfig
	tl, err := lc.Listen(context.Background(), network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return &listener{
		addr:  addr,
		tcp:   tl.(*net.TCPListener),
		stopc: make(chan struct{}),
		conns: make(map[*tcpConn]struct{}),
	}, nil
}

func (s *Server) tlsConfig(alpn ...string) *tls.Config {
	return &tls.Config{
		// RFC 8996 deprecates TLS 1.0 and 1.1; RFC 8310 §9 asks DoT for 1.2
		// or later. A client offering only older versions gets an alert.
		MinVersion: tls.VersionTLS12,
		NextProtos: alpn,
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := s.tls.certs.Load(); c != nil {
				return c.src.GetCertificate(h)
			}
			return nil, errNoCertificate
		},
	}
}

// admitStream applies docs/design.md#client-shares to a new DoT or DoH connection before any
// TLS work, as to a plain TCP one (admitConn): one address cannot hold every
// place of the TCP cap, whichever transport it uses.
func (s *Server) admitStream(c *net.TCPConn, fc *frontCounters) (client netip.Addr, release func(), ok bool) {
	return s.admitConn(c, refusals{notAllowed: &fc.refusedNotAllowed, share: &fc.refusedShare, capacity: &fc.refusedCapacity})
}

// handshake runs the TLS handshake within the bound. A failure is counted
// unless the listener is stopping (its stop cuts handshakes in progress).
func (s *Server) handshake(l *listener, c *tls.Conn, fc *frontCounters) error {
	bound := s.tls.handshake
	if bound <= 0 {
		bound = tlsHandshakeTimeout
	}
	c.SetDeadline(time.Now().Add(bound))
	err := c.HandshakeContext(s.ctx)
	if err != nil {
		var ne net.Error
		switch {
		case l.stopping() || s.ctx.Err() != nil:
		case errors.As(err, &ne) && ne.Timeout():
			fc.handshakeTimeout.Add(1)
		default:
			fc.handshakeFailed.Add(1)
			s.log.Debug("TLS handshake failed", zap.String("listen", l.addr), zap.Stringer("client", c.RemoteAddr()), zap.Error(err))
		}
		return err
	}
	c.SetDeadline(time.Time{}) // from here each read and write sets its own
	return nil
}

// TLSAddrs returns the bound addresses of the current DoT and DoH listeners,
// in ListenTLS order.
func (s *Server) TLSAddrs() (dot, doh []net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.tls.dot {
		dot = append(dot, l.tcp.Addr())
	}
	for _, l := range s.tls.doh {
		doh = append(doh, l.tcp.Addr())
	}
	return dot, doh
}

// FrontSnapshot is one TLS front end's connection counters.
type FrontSnapshot struct {
	RefusedNotAllowed uint64 // closed at accept: the peer is outside dns.allow
	RefusedShare      uint64 // closed at accept: the client held its share of the TCP cap
	RefusedCapacity   uint64 // closed at accept: the TCP per-family cap was reached
	HandshakeTimeouts uint64 // no handshake within the bound
	HandshakeFailures uint64 // a handshake that failed: not TLS, TLS < 1.2, no common cipher
	Retries           uint64 // QUIC only: Initials answered with a Retry under load (quicretry.go)
}

// StatusCount is the number of DoH requests answered with one HTTP error.
type StatusCount struct {
	Status int
	Count  uint64
}

// TLSSnapshot is the DoT and DoH counters.
type TLSSnapshot struct {
	DoT, DoH  FrontSnapshot
	DoQ       FrontSnapshot // refusals, Retries and failed handshakes; no capacity refusal (doq.go)
	DoH3      FrontSnapshot // the same for DoH over HTTP/3 (doh3.go)
	DoHErrors []StatusCount // every status of dohStatuses, zero counts included
}

// TLSSnapshot reads the DoT and DoH counters.
func (s *Server) TLSSnapshot() TLSSnapshot {
	front := func(fc *frontCounters) FrontSnapshot {
		return FrontSnapshot{
			RefusedNotAllowed: fc.refusedNotAllowed.Load(), RefusedShare: fc.refusedShare.Load(),
			RefusedCapacity:   fc.refusedCapacity.Load(),
			HandshakeTimeouts: fc.handshakeTimeout.Load(), HandshakeFailures: fc.handshakeFailed.Load(),
		}
	}
	snap := TLSSnapshot{DoT: front(&s.tls.stats.dot), DoH: front(&s.tls.stats.doh), DoQ: s.doq.snapshot(), DoH3: s.tls.doh3.snapshot()}
	for i, st := range dohStatuses {
		snap.DoHErrors = append(snap.DoHErrors, StatusCount{Status: st, Count: s.tls.stats.dohStatus[i].Load()})
	}
	return snap
}
