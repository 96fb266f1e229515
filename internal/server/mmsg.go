package server

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// mmsgConn reads and writes a UDP socket's datagrams several at a time,
// with recvmmsg and sendmmsg made as raw system calls on the socket's
// non-blocking descriptor, through structures it allocates once.
//
// It replaced x/net's ipv4.PacketConn batches, which do the same calls as
// blocking system calls and allocate each sender's address. A blocking
// call tells the runtime the thread may be gone a while, so the runtime
// gets ready to hand the processor to another thread; at a household's
// rate, where datagrams come one at a time, those hand-offs and the thread
// wake-ups around them cost more CPU than the query. These calls never
// block. A read returns what is queued or EAGAIN, and on EAGAIN the
// goroutine waits in the runtime's poller like any socket read. A UDP send
// returns once the kernel has queued the datagrams, or EAGAIN when the send
// buffer is full, and then the poller waits for room (docs/performance.md
// "Answer cache").
//
// Guarantee: ReadBatch and WriteBatch do what ipv4.PacketConn's do for
// messages of exactly one buffer, at most udpBatchSize at a time:
//   - a read fills N, NN, Flags (MSG_TRUNC for a datagram longer than its
//     buffer) and Addr, a *net.UDPAddr that belongs to the conn and is
//     valid until the next read;
//   - a write sends each message to its Addr, with its OOB as control
//     messages, and returns how many went out (0 and the error when the
//     first failed).
//
// An answer to an address from the last read goes to the sender's own
// socket address, link-local scope included. Neither call allocates (but
// for a link-local sender's interface name, looked up once a minute:
// zones.go). Not safe for concurrent use: each reader has its own.
type mmsgConn struct {
	rc  syscall.RawConn
	err error // the socket had no descriptor: every call fails with it
	v6  bool  // an AF_INET6 socket: other addresses are sent v4-mapped

	rhdrs []mmsghdr
	riov  []unix.Iovec
	rname []unix.RawSockaddrInet6 // large enough for either family
	raddr []net.UDPAddr
	rip   [][net.IPv6len]byte // raddr[i].IP's bytes

	whdrs []mmsghdr
	wiov  []unix.Iovec
	wname []unix.RawSockaddrInet6

	// The calls, made once: a closure built per call would escape to the
	// heap through RawConn. Each takes its vector length and flags from
	// call and leaves its count and errno there.
	recv, send func(fd uintptr) bool
	call       struct {
		n, flags, got int
		errno         syscall.Errno
	}
}

// mmsghdr is the kernel's struct mmsghdr: a msghdr and the byte count the
// call reports for it (Go pads the struct to the same size C does).
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// errMmsgMessage is a message the conn cannot send or read into: it takes
// exactly one buffer per message.
var errMmsgMessage = errors.New("mmsg: a message needs exactly one buffer")

func newMmsgConn(sock *net.UDPConn, v6 bool) *mmsgConn {
	rc, err := sock.SyscallConn()
	n := udpBatchSize
	c := &mmsgConn{
		rc: rc, err: err, v6: v6,
		rhdrs: make([]mmsghdr, n), riov: make([]unix.Iovec, n), rname: make([]unix.RawSockaddrInet6, n),
		raddr: make([]net.UDPAddr, n), rip: make([][net.IPv6len]byte, n),
		whdrs: make([]mmsghdr, n), wiov: make([]unix.Iovec, n), wname: make([]unix.RawSockaddrInet6, n),
	}
	c.recv = func(fd uintptr) bool { return c.mmsg(fd, unix.SYS_RECVMMSG, c.rhdrs) }
	c.send = func(fd uintptr) bool { return c.mmsg(fd, unix.SYS_SENDMMSG, c.whdrs) }
	return c
}

// mmsg makes one recvmmsg or sendmmsg call over hdrs[:c.call.n], for
// RawConn.Read or Write: false (wait in the poller) on EAGAIN, otherwise
// true with the count and errno in c.call. An interrupted call is made
// again.
func (c *mmsgConn) mmsg(fd, trap uintptr, hdrs []mmsghdr) bool {
	for {
		r, _, e := unix.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&hdrs[0])), uintptr(c.call.n), uintptr(c.call.flags), 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		c.call.got, c.call.errno = int(r), e
		return true
	}
}

// ReadBatch waits for at least one datagram and reads what is queued, up to
// len(ms) and udpBatchSize.
func (c *mmsgConn) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := min(len(ms), len(c.rhdrs))
	for i := range n {
		m := &ms[i]
		if len(m.Buffers) != 1 || len(m.Buffers[0]) == 0 {
			return 0, errMmsgMessage
		}
		h := &c.rhdrs[i]
		*h = mmsghdr{}
		c.riov[i] = unix.Iovec{Base: &m.Buffers[0][0]}
		c.riov[i].SetLen(len(m.Buffers[0]))
		h.hdr.Iov = &c.riov[i]
		h.hdr.SetIovlen(1)
		h.hdr.Name = (*byte)(unsafe.Pointer(&c.rname[i]))
		h.hdr.Namelen = unix.SizeofSockaddrInet6
		if len(m.OOB) > 0 {
			h.hdr.Control = &m.OOB[0]
			h.hdr.SetControllen(len(m.OOB))
		}
	}
	c.call.n, c.call.flags = n, flags
	if err := c.rc.Read(c.recv); err != nil { // EAGAIN waits for a datagram
		return 0, err
	}
	if c.call.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", c.call.errno)
	}
	for i := range c.call.got {
		m, h := &ms[i], &c.rhdrs[i]
		m.N, m.NN, m.Flags = int(h.n), int(h.hdr.Controllen), int(h.hdr.Flags)
		m.Addr = c.sender(i)
	}
	return c.call.got, nil
}

// sender is the i-th datagram's source address, in the conn's own UDPAddr.
func (c *mmsgConn) sender(i int) *net.UDPAddr {
	sa, a, ip := &c.rname[i], &c.raddr[i], &c.rip[i]
	*a = net.UDPAddr{}
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		copy(ip[:], sa4.Addr[:])
		a.IP, a.Port = ip[:net.IPv4len], int(netPort(&sa4.Port))
	case unix.AF_INET6:
		copy(ip[:], sa.Addr[:])
		a.IP, a.Port = ip[:], int(netPort(&sa.Port))
		if sa.Scope_id != 0 {
			// A link-local sender: its interface as the zone, which the
			// standard library's writes take, so an answer sent the
			// general way reaches it too (zones.go).
			a.Zone = linkZones.zoneName(sa.Scope_id, time.Now())
		}
	}
	return a
}

// WriteBatch sends ms, up to udpBatchSize of them, and returns how many
// went out.
func (c *mmsgConn) WriteBatch(ms []ipv4.Message, flags int) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := min(len(ms), len(c.whdrs))
	if n == 0 {
		return 0, nil
	}
	for j := range n {
		m := &ms[j]
		if len(m.Buffers) != 1 {
			if j == 0 {
				return 0, errMmsgMessage
			}
			n = j
			break
		}
		h := &c.whdrs[j]
		*h = mmsghdr{}
		c.wiov[j] = unix.Iovec{}
		if b := m.Buffers[0]; len(b) > 0 {
			c.wiov[j].Base = &b[0]
			c.wiov[j].SetLen(len(b))
		}
		h.hdr.Iov = &c.wiov[j]
		h.hdr.SetIovlen(1)
		namelen, err := c.destination(&c.wname[j], m.Addr)
		if err != nil {
			if j == 0 {
				return 0, err
			}
			n = j // send those before it; the caller learns of this one next
			break
		}
		h.hdr.Name, h.hdr.Namelen = (*byte)(unsafe.Pointer(&c.wname[j])), namelen
		if len(m.OOB) > 0 {
			h.hdr.Control = &m.OOB[0]
			h.hdr.SetControllen(len(m.OOB))
		}
	}
	c.call.n, c.call.flags = n, flags
	if err := c.rc.Write(c.send); err != nil { // EAGAIN waits for room
		return 0, err
	}
	if c.call.errno != 0 {
		return 0, os.NewSyscallError("sendmmsg", c.call.errno)
	}
	return c.call.got, nil
}

// destination writes addr into sa as the socket's family takes it and
// returns its length. An address from the last read is copied as the
// kernel gave it, so a link-local sender's scope is kept.
func (c *mmsgConn) destination(sa *unix.RawSockaddrInet6, addr net.Addr) (uint32, error) {
	a, ok := addr.(*net.UDPAddr)
	if !ok || a == nil {
		return 0, &net.AddrError{Err: "not a UDP address", Addr: addrString(addr)}
	}
	for i := range c.raddr {
		if a == &c.raddr[i] {
			*sa = c.rname[i]
			if sa.Family == unix.AF_INET {
				return unix.SizeofSockaddrInet4, nil
			}
			return unix.SizeofSockaddrInet6, nil
		}
	}
	*sa = unix.RawSockaddrInet6{}
	ip4 := a.IP.To4()
	if !c.v6 {
		if ip4 == nil {
			return 0, &net.AddrError{Err: "not an IPv4 address", Addr: a.String()}
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		sa4.Family = unix.AF_INET
		putNetPort(&sa4.Port, uint16(a.Port))
		copy(sa4.Addr[:], ip4)
		return unix.SizeofSockaddrInet4, nil
	}
	ip16 := a.IP.To16()
	if ip16 == nil {
		return 0, &net.AddrError{Err: "not an IP address", Addr: a.String()}
	}
	sa.Family = unix.AF_INET6
	putNetPort(&sa.Port, uint16(a.Port))
	copy(sa.Addr[:], ip16) // an IPv4 address becomes v4-mapped
	if a.Zone != "" {
		if i, err := strconv.ParseUint(a.Zone, 10, 32); err == nil {
			sa.Scope_id = uint32(i)
		} else if ifi, err := net.InterfaceByName(a.Zone); err == nil {
			sa.Scope_id = uint32(ifi.Index)
		}
	}
	return unix.SizeofSockaddrInet6, nil
}

func addrString(a net.Addr) string {
	if a == nil {
		return "<nil>"
	}
	return a.String()
}

// netPort reads a sockaddr's port, kept in network byte order.
func netPort(p *uint16) uint16 {
	return binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(p))[:])
}

func putNetPort(p *uint16, port uint16) {
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(p))[:], port)
}
