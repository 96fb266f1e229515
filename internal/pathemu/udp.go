package pathemu

import (
	"errors"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// UDP across the emulated path: each client address gets its own socket
// towards the target (a session), so the target's answers find their way
// back. Every datagram, each way, is dropped with probability Loss or
// delivered after its one-way delay; datagrams do not wait for one another.

// udpSessionIdle ends a session nobody used for this long, so a client
// changing ports (every query from a new port, as stub resolvers do) costs
// a socket only briefly.
const udpSessionIdle = 30 * time.Second

// maxUDPSessions bounds the sockets the relay holds for clients: past it a
// datagram from a new client address is dropped (a flood through the relay
// meets the relay's limit, not the machine's).
const maxUDPSessions = 4096

// maxDatagram is the largest datagram relayed (the UDP maximum).
const maxDatagram = 65535

// udpSession is one client address's socket towards the target.
type udpSession struct {
	client netip.AddrPort
	up     *net.UDPConn // connected to the target
	last   time.Time    // the relay's last datagram from the client; guarded by Relay.mu
}

func (r *Relay) udpLoop() {
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := r.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // Close
		}
		s := r.session(from)
		if s == nil || r.path.lost() {
			continue
		}
		b := append([]byte(nil), buf[:n]...)
		time.AfterFunc(r.path.oneWay(), func() { s.up.Write(b) })
	}
}

// session returns the client's session, starting one (and its reader) if
// needed; nil when the relay is closed or holds maxUDPSessions.
func (r *Relay) session(client netip.AddrPort) *udpSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	if s := r.udpSes[client]; s != nil {
		s.last = time.Now()
		return s
	}
	if len(r.udpSes) >= maxUDPSessions {
		return nil
	}
	raddr, err := net.ResolveUDPAddr("udp", r.target)
	if err != nil {
		return nil
	}
	up, err := net.DialUDP("udp", nil, raddr)
	if err != nil {
		return nil
	}
	s := &udpSession{client: client, up: up, last: time.Now()}
	r.udpSes[client] = s
	r.wg.Go(func() { r.udpReturn(s) })
	return s
}

// udpReturn carries the target's datagrams back to the session's client
// until the session has been idle for udpSessionIdle or the relay closes.
func (r *Relay) udpReturn(s *udpSession) {
	defer s.up.Close()
	buf := make([]byte, maxDatagram)
	for {
		s.up.SetReadDeadline(time.Now().Add(udpSessionIdle))
		n, err := s.up.Read(buf)
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, syscall.ECONNREFUSED):
			r.udpRefused.Add(1)
			continue // the target's port was closed for one datagram (ICMP): as on a real path, it is lost
		case errors.As(err, &ne) && ne.Timeout():
			if !r.expire(s) {
				continue
			}
			return
		default:
			r.forget(s) // closed by Close, or broken: the next datagram starts a new session
			return
		}
		if r.path.lost() {
			continue
		}
		b := append([]byte(nil), buf[:n]...)
		time.AfterFunc(r.path.oneWay(), func() { r.udp.WriteToUDPAddrPort(b, s.client) })
	}
}

// UDPRefused is how many datagrams towards the target came back refused
// (the kernel's ICMP port unreachable): each was lost, as on a real path.
func (r *Relay) UDPRefused() int64 { return r.udpRefused.Load() }

// forget removes s from the sessions, if it is still the client's.
func (r *Relay) forget(s *udpSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.udpSes[s.client] == s {
		delete(r.udpSes, s.client)
	}
}

// expire ends s if it has been idle for udpSessionIdle; false if a client
// datagram came in the meantime.
func (r *Relay) expire(s *udpSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed && time.Since(s.last) < udpSessionIdle {
		return false
	}
	delete(r.udpSes, s.client)
	return true
}
