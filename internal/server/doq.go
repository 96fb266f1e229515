package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/query"
)

// Serving DNS over QUIC (RFC 9250; docs/server.md "DNS over QUIC"). Each
// tls.doq_listen address is a quic-go listener on its own UDP socket, behind
// the DoT certificate source (so a renewal reaches new handshakes) with ALPN
// "doq". The rules, each where RFC 9250 or the TCP front ends put it:
//
//   - dns.allow is checked when quic-go is about to create a connection for
//     a client's first Initial packet (Config.GetConfigForClient), before any
//     TLS work; a refused client gets a CONNECTION_REFUSED and no state.
//   - A client holds at most tcpClientShare connections across the DoQ
//     listeners, as on TCP; one more is closed with DOQ_EXCESSIVE_LOAD.
//   - A connection has at most maxConnQueries streams open at once (QUIC's
//     own stream limit, RFC 9000 §4.6: the peer cannot exceed it), as a TCP
//     connection has that many pipelined queries; no unidirectional streams.
//   - One stream carries one query: a 2-octet length, the message with ID 0,
//     then FIN (RFC 9250 §4.2). Anything else is DOQ_PROTOCOL_ERROR and ends
//     the connection (§4.3.3).
//   - Queries run under the server's context and the client's DoH share
//     (dohClientShare queries in flight), for the reason serveDoH gives: a
//     reset stream must not free a place while its work goes on.
//   - Answers take the common serve path with proto doq, so the query log,
//     metrics and events are DoT's.
//   - 0-RTT is accepted (an early listener with Allow0RTT; docs/server.md
//     "0-RTT"): a standard QUERY read from a connection whose handshake is
//     still running is answered at once, as RFC 9250 §4.5 allows for a
//     replayable transaction. Any other opcode waits for the handshake to
//     complete (§4.5's first option), so a replayed one, whose handshake an
//     attacker without the client's keys cannot complete, is never
//     processed. The share of connections is taken at the early Accept, so
//     replayed connections count in it until their handshake times out.
//   - With filter.state_dir, a packet for a connection the listener has no
//     state for (one of the process before a restart) gets a stateless
//     reset (RFC 9000 §10.3), from a key that survives the restart
//     (resetkey.go).

// The DoQ error codes (RFC 9250 §8.4), untyped: both connection and stream
// errors carry them.
const (
	doqNoError       = 0x0
	doqInternalError = 0x1
	doqProtocolError = 0x2
	doqExcessiveLoad = 0x4
)

// doqIdleTimeout closes a connection with no traffic for this long: the TCP
// front ends' idle bound. RFC 9250 §5.5.1 leaves the value to the server.
const doqIdleTimeout = tcpIdleTimeout

// doqFront is the Server's state for one QUIC service: DoQ (s.doq) or DoH
// over HTTP/3 (s.tls.doh3, doh3.go). Both get the same admission at the
// first packet, the same per-client connection share and the same
// listener reconciliation; serve is what runs on an admitted connection.
type doqFront struct {
	mu    sync.Mutex     // guards ls, conf, qconf, serve and name
	ls    []*doqListener // the current ones, in ListenDoQ order
	conf  *tls.Config    // built once; certificates read through tlsFront.certs
	qconf *quic.Config   // every admitted connection's QUIC configuration
	serve func(c *quic.Conn, client netip.Addr)
	name  string // "DoQ" or "DoH3": what its stateless-reset keys derive from
	// early makes the listeners quic-go's early ones: Accept returns a
	// connection before its handshake completes, so that 0-RTT is served
	// (DoQ only; qconf allows 0-RTT then).
	early bool
	// noError and excessiveLoad are the application's codes for a clean
	// close and for a connection over the client's share: DoQ's (RFC 9250
	// §8.4) or HTTP/3's (RFC 9114 §8.1).
	noError, excessiveLoad quic.ApplicationErrorCode
	conns                  *clientShares  // connections per client, across the front's listeners
	wg                     sync.WaitGroup // every goroutine of every listener of the front

	handshakes quicHandshakes // in progress across the front's listeners, for Retry under load

	refusedNotAllowed atomic.Uint64 // Initial packets from outside dns.allow
	refusedShare      atomic.Uint64 // connections over the client's share
	protocolErrors    atomic.Uint64 // connections closed with DOQ_PROTOCOL_ERROR
}

type doqListener struct {
	addr    string
	noError quic.ApplicationErrorCode // the front's clean close
	udp     *net.UDPConn
	tr      *quic.Transport
	ln      quicListener

	mu    sync.Mutex
	conns map[*quic.Conn]struct{} // accepted and being served, for close
}

// ListenDoQ makes the DoQ listeners match addrs (IP:port each), as
// ListenTLS does for DoT: kept addresses stay, new ones are bound before any
// is removed, and a failure changes nothing. It needs the certificate
// ListenTLS was given.
func (s *Server) ListenDoQ(addrs []string) error {
	return s.listenQUIC(&s.doq, "DoQ", addrs, func(d *doqFront) {
		d.conf = s.tlsConfig("doq") // RFC 9250 §4.1.1; QUIC itself requires TLS 1.3
		d.qconf = doqQUICConfig.Clone()
		d.qconf.Allow0RTT, d.early = true, true
		d.noError, d.excessiveLoad = doqNoError, doqExcessiveLoad
		d.serve = s.serveDoQConn
	})
}

// listenQUIC makes d's listeners match addrs, as ListenDoQ says; setup
// fills d's TLS and QUIC configurations and serve the first time. what
// names the service in errors.
func (s *Server) listenQUIC(d *doqFront, what string, addrs []string, setup func(*doqFront)) error {
	// Held throughout, as ListenTLS does: Shutdown sets closed under s.mu
	// before stopDoQ, so no listener bound here outlives it.
	s.mu.Lock()
	defer s.mu.Unlock()
	closed, certs := s.closed, s.tls.certs.Load()
	if closed {
		return errors.New("server: listen after shutdown")
	}
	if len(addrs) > 0 && certs == nil {
		return fmt.Errorf("server: %s listeners need a certificate", what)
	}
	if len(addrs) > 0 && !s.quicResetSet {
		s.quicReset, s.quicResetSet = LoadQUICResetSecret(s.stateDir, s.log), true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conf == nil {
		d.name = what
		setup(d)
		d.conns = newClientShares(tcpClientShare)
	}
	cur := make(map[string]*doqListener, len(d.ls))
	for _, l := range d.ls {
		cur[l.addr] = l
	}
	var next, fresh []*doqListener
	for _, a := range addrs {
		if l, ok := cur[a]; ok {
			next = append(next, l)
			delete(cur, a)
			continue
		}
		l, err := s.bindQUIC(d, a)
		if err != nil {
			for _, f := range fresh {
				f.close()
			}
			return err
		}
		fresh = append(fresh, l)
		next = append(next, l)
	}
	for _, l := range cur { // no longer listed
		l.close()
	}
	for _, l := range fresh {
		d.wg.Go(func() { s.acceptQUIC(d, l) })
	}
	d.ls = next
	return nil
}

// bindQUIC opens the UDP socket of one of d's addresses and its QUIC
// listener. The error names addr.
func (s *Server) bindQUIC(d *doqFront, addr string) (*doqListener, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	network := "udp4"
	if ap.Addr().Is6() && !ap.Addr().Is4In6() {
		network = "udp6"
	}
	udp, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(ap))
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	tr := &quic.Transport{
		Conn:                udp,
		VerifySourceAddress: func(a net.Addr) bool { return s.quicValidate(d, a) },
		ConnContext:         d.handshakes.begin,
		// From filter.state_dir, so that after a restart the listener at
		// this address answers the old process's connections with a
		// stateless reset (RFC 9000 §10.3); nil without it.
		StatelessResetKey: quicResetKey(s.quicReset, d.name, udp.LocalAddr()),
	}
	conf := d.qconf.Clone()
	conf.GetConfigForClient = func(info *quic.ClientInfo) (*quic.Config, error) { return s.quicAdmit(d, info) }
	var ln quicListener
	if d.early {
		ln, err = tr.ListenEarly(d.conf, conf)
	} else {
		ln, err = tr.Listen(d.conf, conf)
	}
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	return &doqListener{addr: addr, noError: d.noError, udp: udp, tr: tr, ln: ln, conns: map[*quic.Conn]struct{}{}}, nil
}

// quicListener is a quic.Listener or a quic.EarlyListener.
type quicListener interface {
	Accept(context.Context) (*quic.Conn, error)
	Close() error
}

// doqQUICConfig is every DoQ connection's QUIC configuration, but for
// Allow0RTT, which ListenDoQ sets on its copy. quicAdmit
// returns it for each admitted client: quic-go uses its defaults (100
// streams) for a connection whose GetConfigForClient returns nil.
//
// Its receive windows are DoH/2's (dohStreamBuffer per stream, dohConnBuffer
// per connection), not quic-go's defaults (512 KiB per stream, growing to
// 6 MiB, and 15 MiB per connection): a DoQ query is at most maxTCPQuerySize
// octets and a DoH3 request its headers and such a body, so a bigger window
// would only let a client make nxdns buffer what it never reads. A stream
// that carries more waits for the window to move as nxdns reads (RFC 9000
// §4.1); the connection's window is one stream's for each of the
// maxConnQueries it may have open.
var doqQUICConfig = &quic.Config{
	HandshakeIdleTimeout:           tlsHandshakeTimeout,
	MaxIdleTimeout:                 doqIdleTimeout,
	MaxIncomingStreams:             maxConnQueries,
	MaxIncomingUniStreams:          -1, // RFC 9250 §4.2: DoQ uses bidirectional streams only
	InitialStreamReceiveWindow:     dohStreamBuffer,
	MaxStreamReceiveWindow:         dohStreamBuffer,
	InitialConnectionReceiveWindow: dohConnBuffer,
	MaxConnectionReceiveWindow:     dohConnBuffer,
}

var errDoQNotAllowed = errors.New("client outside dns.allow")

// quicAdmit runs on a client's first Initial packet to one of d's
// listeners, before the handshake: a client outside dns.allow costs no TLS
// work.
func (s *Server) quicAdmit(d *doqFront, info *quic.ClientInfo) (*quic.Config, error) {
	client := query.ClientOfRemote(info.RemoteAddr.String())
	if !s.allowedNow(client) {
		d.refusedNotAllowed.Add(1)
		return nil, errDoQNotAllowed
	}
	return d.qconf, nil
}

// close ends the listener. Its connections are closed with DOQ_NO_ERROR
// (H3_NO_ERROR for DoH3) first, so their clients learn at once (RFC 9250 §4.3): closing the
// transport alone drops them without telling the peer, which then waits
// for its idle timeout.
func (l *doqListener) close() {
	l.ln.Close()
	l.mu.Lock()
	for c := range l.conns {
		c.CloseWithError(l.noError, "listener removed")
	}
	l.conns = nil
	l.mu.Unlock()
	l.tr.Close()
	l.udp.Close()
}

// track adds c to the listener's connections until it ends; false when
// the listener is already closed.
func (l *doqListener) track(c *quic.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *doqListener) untrack(c *quic.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// stopDoQ closes every DoQ and DoH3 listener and their connections;
// Shutdown waits for their goroutines (doqFront.wg).
func (s *Server) stopDoQ() {
	for _, d := range []*doqFront{&s.doq, &s.tls.doh3} {
		d.mu.Lock()
		for _, l := range d.ls {
			l.close()
		}
		d.ls = nil
		d.mu.Unlock()
	}
}

// acceptQUIC takes l's connections under d's per-client share and serves
// each in its own goroutine. The share's excess is closed with d's
// excessive-load code (DOQ_EXCESSIVE_LOAD, H3_EXCESSIVE_LOAD).
func (s *Server) acceptQUIC(d *doqFront, l *doqListener) {
	for {
		c, err := l.ln.Accept(context.Background())
		if err != nil {
			return // the listener closed
		}
		if d.early {
			// Accept returned before the handshake: it ends when the
			// handshake completes, or with the connection.
			d.wg.Go(func() {
				select {
				case <-c.HandshakeComplete():
					d.handshakes.done(c.Context())
				case <-c.Context().Done():
				}
			})
		} else {
			d.handshakes.done(c.Context()) // Accept returns a connection after its handshake
		}
		client := query.ClientOfRemote(c.RemoteAddr().String())
		key := clientKey(client)
		if !d.conns.tryAcquire(key) {
			d.refusedShare.Add(1)
			if d.early {
				// A close before the handshake completes reaches the
				// client as a bare APPLICATION_ERROR (RFC 9000 §10.2.3):
				// wait for it, so that the client learns the code.
				d.wg.Go(func() {
					select {
					case <-c.HandshakeComplete():
					case <-c.Context().Done():
					}
					c.CloseWithError(d.excessiveLoad, "too many connections from this client")
				})
				continue
			}
			c.CloseWithError(d.excessiveLoad, "too many connections from this client")
			continue
		}
		if !l.track(c) {
			d.conns.release(key)
			c.CloseWithError(d.noError, "listener removed")
			return
		}
		d.wg.Go(func() {
			defer d.conns.release(key)
			defer l.untrack(c)
			d.serve(c, client)
		})
	}
}

// serveDoQConn answers each stream of c until the connection ends.
func (s *Server) serveDoQConn(c *quic.Conn, client netip.Addr) {
	var streams sync.WaitGroup
	defer streams.Wait()
	for {
		st, err := c.AcceptStream(context.Background())
		if err != nil {
			return // closed by either side, idle, or the listener closed
		}
		streams.Go(func() { s.serveDoQStream(c, st, client) })
	}
}

// serveDoQStream reads one query from st, answers it, and ends the stream.
func (s *Server) serveDoQStream(c *quic.Conn, st *quic.Stream, client netip.Addr) {
	wire, err := readDoQQuery(st)
	if err != nil {
		if errors.Is(err, errDoQFraming) {
			s.doq.protocolErrors.Add(1)
			c.CloseWithError(doqProtocolError, err.Error())
		} else {
			st.CancelRead(doqInternalError)
			st.CancelWrite(doqInternalError)
		}
		return
	}
	if doqOpcode(wire) != dns.OpcodeQuery {
		// Not replayable: held until the handshake completes (RFC 9250
		// §4.5), which a replayed 0-RTT flight never does. Bounded by the
		// handshake timeout, after which quic-go ends the connection.
		select {
		case <-c.HandshakeComplete():
		case <-c.Context().Done():
			return
		}
	}
	key := clientKey(client)
	if !s.dohShare.tryAcquire(key) {
		st.CancelWrite(doqExcessiveLoad)
		return
	}
	defer s.dohShare.release(key)
	answered := false
	s.serve(s.ctx, wire, client, query.DoQ, func(ans []byte) error {
		answered = true
		st.SetWriteDeadline(time.Now().Add(tcpWriteTimeout))
		out := make([]byte, 2+len(ans)) // one write: the prefix and the message in one STREAM frame
		binary.BigEndian.PutUint16(out, uint16(len(ans)))
		copy(out[2:], ans)
		if _, err := st.Write(out); err != nil {
			return err
		}
		return st.Close() // FIN: the answer is complete (RFC 9250 §4.2)
	})
	if !answered {
		st.CancelWrite(doqInternalError)
	}
}

var errDoQFraming = errors.New("DoQ framing")

// doqOpcode is the OPCODE of a query readDoQQuery returned (at least a
// header long).
func doqOpcode(wire []byte) int { return int(wire[2]>>3) & 0xf }

// readDoQQuery reads the one length-prefixed query of a stream and its FIN,
// within tcpIdleTimeout for the whole of it. A wrong length, bytes after
// the message or a message ID other than 0 is errDoQFraming (RFC 9250
// §4.2, §4.2.1); a query over maxTCPQuerySize is refused the same way, as
// no real query comes near it.
func readDoQQuery(st *quic.Stream) ([]byte, error) {
	st.SetReadDeadline(time.Now().Add(tcpIdleTimeout))
	var n [2]byte
	if _, err := io.ReadFull(st, n[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: no length", errDoQFraming)
		}
		return nil, err
	}
	size := int(binary.BigEndian.Uint16(n[:]))
	if size < 12 || size > maxTCPQuerySize {
		return nil, fmt.Errorf("%w: query length %d", errDoQFraming, size)
	}
	wire := make([]byte, size)
	if _, err := io.ReadFull(st, wire); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the stream ended inside the query", errDoQFraming)
		}
		return nil, err
	}
	var extra [1]byte
	switch k, err := st.Read(extra[:]); {
	case k > 0:
		return nil, fmt.Errorf("%w: bytes after the query", errDoQFraming)
	case err == nil:
		// Read may return 0, nil; one more read settles it.
		if k, err = io.ReadFull(st, extra[:]); k > 0 {
			return nil, fmt.Errorf("%w: bytes after the query", errDoQFraming)
		} else if !errors.Is(err, io.EOF) {
			return nil, err
		}
	case !errors.Is(err, io.EOF):
		return nil, err
	}
	if binary.BigEndian.Uint16(wire) != 0 {
		return nil, fmt.Errorf("%w: message ID %d, want 0", errDoQFraming, binary.BigEndian.Uint16(wire))
	}
	return wire, nil
}

// snapshot is d's refusals, for TLSSnapshot.
func (d *doqFront) snapshot() FrontSnapshot {
	return FrontSnapshot{RefusedNotAllowed: d.refusedNotAllowed.Load(), RefusedShare: d.refusedShare.Load(),
		Retries:           d.handshakes.retries.Load(),
		HandshakeTimeouts: d.handshakes.timeouts.Load(), HandshakeFailures: d.handshakes.failures.Load()}
}

// DoQAddrs returns the bound UDP addresses of the current DoQ listeners, in
// ListenDoQ order.
func (s *Server) DoQAddrs() []net.Addr { return s.doq.addrs() }

func (d *doqFront) addrs() []net.Addr {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []net.Addr
	for _, l := range d.ls {
		out = append(out, l.udp.LocalAddr())
	}
	return out
}
