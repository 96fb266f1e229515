// Package pathemu emulates a network path between two processes on
// loopback: a relay that delays every TCP byte and every UDP datagram by
// half a round trip in each direction, with jitter and, for UDP, loss.
//
// The kernel's netem is not available on the machines the scenario tests
// run on, and a delay inside a fake upstream's answer is server think-time,
// which a TCP or TLS handshake never pays. The relay puts the delay on the
// path itself, connection set-up included, so a handshake costs its real
// number of round trips (docs/design.md#scenarios): a TCP connect one, a TLS 1.3 handshake
// one more, each query one. See docs/reference/tools.md.
package pathemu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Path is the emulated path's shape.
type Path struct {
	// RTT is the round trip the path adds: each direction is delayed by
	// RTT/2.
	RTT time.Duration
	// Jitter is added to each one-way delay, drawn uniformly from
	// [0, Jitter): a round trip then lasts between RTT and RTT+Jitter. TCP
	// keeps its byte order (a chunk never overtakes the one before it); UDP
	// datagrams may be reordered, as on a real path.
	Jitter time.Duration
	// Loss is the probability, in [0, 1], that one UDP datagram is dropped,
	// drawn for each direction separately. TCP is never lossy: its
	// retransmissions would only add delay the RTT already stands for.
	Loss float64
}

// oneWay is one direction's delay for one delivery.
func (p Path) oneWay() time.Duration {
	d := p.RTT / 2
	if p.Jitter > 0 {
		d += rand.N(p.Jitter)
	}
	return d
}

// lost draws whether one datagram is dropped.
func (p Path) lost() bool { return p.Loss > 0 && rand.Float64() < p.Loss }

// Relay forwards TCP connections and UDP datagrams arriving at Addr to one
// target, across the emulated Path. Close stops it.
//
// Guarantee: every goroutine it starts has ended when Close returns, and
// every socket it opened is closed; a datagram still on the emulated path
// then is dropped (its delivery timer finds the socket closed).
type Relay struct {
	Addr   netip.AddrPort // TCP and UDP, the same port
	target string
	path   Path

	tcp *net.TCPListener
	udp *net.UDPConn
	wg  sync.WaitGroup

	stop chan struct{} // closed by Close

	mu     sync.Mutex // guards the fields below
	closed bool
	conns  map[net.Conn]struct{} // both ends of every relayed TCP connection
	udpSes map[netip.AddrPort]*udpSession

	udpRefused atomic.Int64 // datagrams the target's host refused (ICMP port unreachable)
}

// Start listens on listen (host:port; port 0 picks one, the same for TCP and
// UDP) and relays to target (host:port) across path.
func Start(listen, target string, path Path) (*Relay, error) {
	switch {
	case path.RTT < 0 || path.Jitter < 0:
		return nil, fmt.Errorf("pathemu: negative delay (rtt %v, jitter %v)", path.RTT, path.Jitter)
	case path.Loss < 0 || path.Loss > 1:
		return nil, fmt.Errorf("pathemu: loss %v, want a probability in [0, 1]", path.Loss)
	}
	tl, ul, err := listenPair(listen)
	if err != nil {
		return nil, err
	}
	addr := tl.Addr().(*net.TCPAddr).AddrPort()
	r := &Relay{
		Addr:   addr,
		target: target,
		path:   path,
		tcp:    tl,
		udp:    ul,
		stop:   make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
		udpSes: make(map[netip.AddrPort]*udpSession),
	}
	r.wg.Go(func() { r.acceptLoop(r.tcp) })
	r.wg.Go(r.udpLoop)
	return r, nil
}

// listenPair listens on TCP and on UDP at the same port. With port 0 the
// kernel picks a TCP port whose UDP twin another process may hold (the
// machine runs other tests): then it tries another, a bounded number of
// times.
func listenPair(listen string) (*net.TCPListener, *net.UDPConn, error) {
	_, port, _ := net.SplitHostPort(listen)
	tries := 1
	if port == "0" {
		tries = 20
	}
	var err error
	for range tries {
		var tl net.Listener
		if tl, err = net.Listen("tcp", listen); err != nil {
			return nil, nil, fmt.Errorf("pathemu: %w", err)
		}
		addr := tl.Addr().(*net.TCPAddr).AddrPort()
		var ul *net.UDPConn
		if ul, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr)); err == nil {
			return tl.(*net.TCPListener), ul, nil
		}
		tl.Close()
		err = fmt.Errorf("pathemu: udp on the tcp port %s: %w", addr, err)
	}
	return nil, nil, err
}

// Close stops the relay: the listeners and every relayed connection close,
// and datagrams still on the emulated path are dropped.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.stop)
	for c := range r.conns {
		c.Close()
	}
	for _, s := range r.udpSes {
		s.up.Close()
	}
	r.mu.Unlock()
	err := errors.Join(r.tcp.Close(), r.udp.Close())
	r.wg.Wait()
	return err
}

// track registers a socket so Close reaches it; false if Close came first
// (the socket is then closed).
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}
