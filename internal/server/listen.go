package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// longAgo is a deadline in the past: setting it makes a blocked read or
// write on a socket return at once (Go net/fd_unix.go), which is how a
// listener stops its readers without closing sockets answers still need.
var longAgo = time.Unix(1, 0)

// listener is one configured address: a UDP socket and a TCP listener, the
// goroutines reading them, and the connections and queries they started.
type listener struct {
	addr    string
	udp     *net.UDPConn // nil for DoT and DoH
	tcp     *net.TCPListener
	pktinfo bool // the UDP socket is a wildcard bind: answer from the query's destination (udpsrc.go)
	v6      bool // the UDP socket is IPv6 (udp6)
	// A DoT or DoH listener (tlsfront.go) has no UDP socket; closeConns,
	// if set, cuts the connections it does not track in conns (DoH's).
	closeConns func()
	// overflow: the kernel reports its receive-queue drops (SO_RXQ_OVFL).
	overflow bool
	// broadcasts are the host's IPv4 broadcast addresses when pktinfo is
	// set (a wildcard socket receives broadcasts; a specific bind does not).
	broadcasts []netip.Addr

	stopc     chan struct{} // closed by stop: read no more queries
	stopOnce  sync.Once
	closeOnce sync.Once

	// wg counts everything that may still write to a socket of this
	// listener: the UDP reader, the acceptor, every connection and query.
	// The UDP socket closes only after it, so no answer is written to a
	// closed socket.
	wg sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	conns   map[*tcpConn]struct{}
	stopped bool // stop ran: new connections are closed, not tracked
}

// bind opens the UDP and TCP sockets of addr. The error names addr.
func bind(addr string) (*listener, error) {
	var lc net.ListenConfig
	ctx := context.Background()
	// Bind each family on its own: "[::]:53" as plain "udp" would be a
	// dual-stack socket that collides with "0.0.0.0:53" in the same list
	// (the NixOS module's default). "udp6" sets IPV6_V6ONLY.
	udpNet, tcpNet := "udp4", "tcp4"
	if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Is6() && !ap.Addr().Is4In6() {
		udpNet, tcpNet = "udp6", "tcp6"
	}
	pc, err := lc.ListenPacket(ctx, udpNet, addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	tl, err := lc.Listen(ctx, tcpNet, addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	l := &listener{
		addr:  addr,
		udp:   pc.(*net.UDPConn),
		tcp:   tl.(*net.TCPListener),
		stopc: make(chan struct{}),
		conns: make(map[*tcpConn]struct{}),
	}
	l.v6 = udpNet == "udp6"
	if ua, ok := l.udp.LocalAddr().(*net.UDPAddr); ok && ua.IP.IsUnspecified() {
		l.pktinfo = true
		l.broadcasts = localBroadcasts()
	}
	if l.pktinfo {
		if err := enablePktinfo(l.udp); err != nil {
			l.closeSockets()
			return nil, fmt.Errorf("listen %s: destination address option: %w", addr, err)
		}
	}
	l.overflow = enableOverflow(l.udp) == nil // counted where the kernel can say; served regardless
	// Best effort: the kernel caps it at net.core.rmem_max (Raspberry Pi
	// OS: 208 KiB) without an error.
	l.udp.SetReadBuffer(udpReadBuffer)
	return l, nil
}

// start runs the listener's UDP reader and TCP acceptor. Called with s.mu held.
func (s *Server) start(l *listener) {
	s.live[l] = struct{}{}
	l.wg.Go(func() { s.readUDP(l) })
	l.wg.Go(func() { s.acceptTCP(l, s.admitTCP) })
}

// stop makes the listener take no new query: the UDP reader returns, the TCP
// listener closes, and every connection's reader stops. Queries already read
// still answer.
func (l *listener) stop() {
	l.stopOnce.Do(func() {
		close(l.stopc)
		if l.udp != nil {
			l.udp.SetReadDeadline(longAgo)
		}
		l.tcp.Close()
		l.mu.Lock()
		l.stopped = true
		for c := range l.conns {
			c.stopReading()
		}
		l.mu.Unlock()
	})
}

// abort cuts every connection's pending reads and writes, after Shutdown has
// cancelled the queries: nothing is waited for any more.
func (l *listener) abort() {
	if l.closeConns != nil {
		l.closeConns()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.conn.SetDeadline(longAgo)
	}
}

func (l *listener) stopping() bool {
	select {
	case <-l.stopc:
		return true
	default:
		return false
	}
}

// closeSockets closes both sockets; safe to call more than once.
func (l *listener) closeSockets() {
	l.closeOnce.Do(func() {
		if l.udp != nil {
			l.udp.Close()
		}
		l.tcp.Close()
	})
}

// track registers a new connection so stop and abort reach it. It reports
// false once the listener is stopping: the caller closes the connection.
func (l *listener) track(c *tcpConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *listener) untrack(c *tcpConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// udpReader is the reader's own buffers, reused for every datagram, so
// that reading one and answering a cache hit allocate nothing. Not safe for
// concurrent use: each socket has one reader.
type udpReader struct {
	buf   []byte // the datagram
	oob   []byte // its control messages: destination address, drop count
	ans   []byte // a fast answer
	src   []byte // a fast answer's source-address control message
	name  [wireform.MaxName]byte
	ev    query.Event // a fast answer's event, when the sinks let it be reused (fastPath.reuse)
	drops kernelDrops
	raw   *rawUDP // the socket's calls (rawudp.go)
}

// udpReadSize is the read buffer: a query is one question and an OPT
// record, well under 1 KiB even with cookies and padding, so it holds the
// largest query TCP takes (maxTCPQuerySize). A longer datagram arrives cut
// short (MSG_TRUNC) and is dropped as malformed, never parsed in part.
const udpReadSize = maxTCPQuerySize

func newUDPReader() *udpReader {
	return &udpReader{
		buf: make([]byte, udpReadSize),
		oob: make([]byte, oobSize+overflowOOBSize),
		ans: make([]byte, 0, maxUDPAnswer),
		src: make([]byte, 0, oobSize),
	}
}

// readUDP reads datagrams from the listener's socket, one at a time
// (rawudp.go), until the listener stops: it answers cache hits itself
// (fastpath.go) and admits every other query under the family's
// cap, to be answered by a worker (internal/workers), so a slow query never holds
// up the next datagram.
func (s *Server) readUDP(l *listener) {
	rd := newUDPReader()
	rd.raw = newRawUDP(l.udp)
	var pause errorPause
	for {
		n, oobn, flags, from, err := rd.raw.read(rd.buf, rd.oob)
		if err != nil {
			if l.stopping() || errors.Is(err, net.ErrClosed) {
				return
			}
			if !pause.wait(s.log, l, "udp read", err) {
				return
			}
			continue
		}
		pause.reset(s.log, l)
		wire, oob := rd.buf[:n], rd.oob[:oobn]
		if l.overflow {
			if d := rd.drops.update(oob); d > 0 {
				s.stats.udpKernel.Add(d)
			}
		}
		if flags&syscall.MSG_TRUNC != 0 {
			// Longer than any query, so never read in part: only its
			// header goes on, which cannot parse as a query, and gets
			// FORMERR like any malformed query whose header parses
			// (docs/design.md#answer-size).
			wire = wire[:min(len(wire), headerSize)]
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		s.admitUDP(l, rd, wire, oob, from)
	}
}

// admitUDP drops what cannot be a query before it costs a goroutine, then
// answers a cache hit at once or takes a unit of the client's share and
// of the family's cap, or drops the datagram (docs/design.md#client-shares).
func (s *Server) admitUDP(l *listener, rd *udpReader, wire, oob []byte, from netip.AddrPort) {
	var src netip.Addr
	if l.pktinfo {
		src = packetDst(oob)
	}
	client := query.ClientOf(from.Addr()) // the answer still goes to from, zone and all
	if !deliverable(from, src, l.broadcasts) {
		s.stats.udpBadSource.Add(1)
		return
	}
	if !headerOK(wire) {
		s.stats.malformed.Add(1)
		return
	}
	// A cache hit is answered by the reader itself (fastpath.go): it holds
	// nothing past its write, so it takes no share and no slot. The event
	// is recorded after the write, as on the general path.
	if ans, g, ev, ok := s.answerFast(wire, &rd.name, client, rd.ans[:0], &rd.ev); ok {
		rd.src = appendSourceOOB(rd.src[:0], src)
		err := rd.raw.write(ans, rd.src, from)
		s.finishFast(g, ev, err == nil)
		return
	}
	key := clientKey(client)
	if !s.udpShare.tryAcquire(key) {
		s.stats.udpClientShare.Add(1)
		return
	}
	slot := &s.udpCap[family(client)]
	if !slot.tryAcquire() {
		s.udpShare.release(key)
		s.stats.udpDropped.Add(1)
		return
	}
	q := append([]byte(nil), wire...) // buf is reused by the next read
	raw := rd.raw
	l.wg.Add(1)
	s.work.Run(func() {
		defer l.wg.Done()
		defer s.udpShare.release(key)
		defer slot.release()
		// A failed write (the client's port closed, a full buffer) is
		// counted as undelivered; UDP clients retry on their own timer.
		s.serve(s.ctx, q, client, query.UDP, func(ans []byte) error {
			return raw.send(ans, src, from)
		})
	})
}

// acceptTCP accepts connections until the listener stops, handing each to
// admit, which takes it under the family's cap or refuses it (docs/design.md#listener-caps).
func (s *Server) acceptTCP(l *listener, admit func(*listener, *net.TCPConn)) {
	var pause errorPause
	for {
		c, err := l.tcp.AcceptTCP()
		if err != nil {
			if l.stopping() || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors (EMFILE) and the like: pause rather than
			// spin, as net/http's Server.Serve does.
			if !pause.wait(s.log, l, "tcp accept", err) {
				return
			}
			continue
		}
		pause.reset(s.log, l)
		admit(l, c)
	}
}

// admitTCP admits a plain TCP connection (admitConn: a peer outside
// dns.allow is closed before it takes any capacity, since with the module's
// default 0.0.0.0:53 the WAN may reach the port) and serves it.
func (s *Server) admitTCP(l *listener, c *net.TCPConn) {
	client, release, ok := s.admitConn(c, refusals{notAllowed: &s.stats.tcpNotAllowed, share: &s.stats.tcpClientShare, capacity: &s.stats.tcpRefused})
	if !ok {
		return
	}
	tc := newTCPConn(s, l, c, client, query.TCP)
	l.serveConn(tc, c, release, tc.serve)
}

// serveConn tracks conn and runs serve on the listener's group, returning the
// connection's admission (release) when serve ends; a listener already
// stopping closes c instead.
func (l *listener) serveConn(conn *tcpConn, c net.Conn, release, serve func()) {
	if !l.track(conn) {
		release()
		c.Close()
		return
	}
	l.wg.Go(func() {
		defer release()
		serve()
	})
}

// refusals are the counters a refused connection adds to, by reason: plain
// TCP's, or a DoT or DoH listener's own.
type refusals struct{ notAllowed, share, capacity *atomic.Uint64 }

// admitConn is the admission of every stream connection (plain TCP, DoT,
// DoH), before any other work: a peer outside dns.allow is reset and takes
// no capacity; then a unit of the client's share of the TCP cap, then a unit
// of the family's cap. A refused connection is reset (no TIME_WAIT on our
// side) and counted in r; release returns both units.
func (s *Server) admitConn(c *net.TCPConn, r refusals) (client netip.Addr, release func(), ok bool) {
	client = query.ClientOfNet(c.RemoteAddr())
	if !s.allowedNow(client) {
		r.notAllowed.Add(1)
		reset(c)
		return client, nil, false
	}
	key := clientKey(client)
	if !s.tcpShare.tryAcquire(key) {
		r.share.Add(1)
		reset(c)
		return client, nil, false
	}
	slot := &s.tcpCap[family(client)]
	if !slot.tryAcquire() {
		s.tcpShare.release(key)
		r.capacity.Add(1)
		reset(c)
		return client, nil, false
	}
	return client, func() {
		slot.release()
		s.tcpShare.release(key)
	}, true
}

// reset closes a refused connection with linger 0, a reset: the client
// learns at once, and the connection leaves no TIME_WAIT on our side.
func reset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// allowedNow reports whether client is inside the current State's
// dns.allow. A connection admitted now serves queries under later States
// too; each of its queries is checked again by the handler.
func (s *Server) allowedNow(client netip.Addr) bool {
	return allowed(s.gen.Load().st.Allow, client)
}

// errorPause spaces out retries after a socket error that is not the
// listener's own stop, and logs once per episode rather than once per retry
// (docs/design.md#logs): the first error warns, the recovery says so.
type errorPause struct {
	delay time.Duration
}

const (
	minErrorPause = 5 * time.Millisecond
	maxErrorPause = time.Second
)

// wait logs the first error of an episode and sleeps; it reports false if
// the listener stopped meanwhile.
func (p *errorPause) wait(log *zap.Logger, l *listener, op string, err error) bool {
	if p.delay == 0 {
		log.Warn("listener error; retrying", zap.String("listen", l.addr), zap.String("op", op), zap.Error(err))
		p.delay = minErrorPause
	} else {
		p.delay = min(2*p.delay, maxErrorPause)
	}
	t := time.NewTimer(p.delay)
	defer t.Stop()
	select {
	case <-l.stopc:
		return false
	case <-t.C:
		return true
	}
}

func (p *errorPause) reset(log *zap.Logger, l *listener) {
	if p.delay != 0 {
		log.Info("listener recovered", zap.String("listen", l.addr))
		p.delay = 0
	}
}
