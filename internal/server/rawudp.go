package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawUDP reads and writes a UDP socket one datagram at a time with
// recvmsg and sendmsg made as raw system calls on the socket's descriptor,
// in place of net.UDPConn's ReadMsgUDPAddrPort and WriteMsgUDPAddrPort.
//
// Why: the standard library makes those calls through syscall.Syscall,
// whose entersyscall wakes the Go runtime's monitor thread (sysmon)
// whenever it sleeps — and it sleeps each time every processor is idle,
// which at a household's rate is between any two queries. Each query then
// pays a thread wake-up and a futex on top of the call itself. On the
// work-per-query benchmark (docs/performance.md, "Work per query"; 2 000
// hits a second, 2-core x86_64, four alternating rounds) a cache hit cost
// 90-118 µs of CPU through the standard library and 35-39 µs this way,
// against Unbound's 30-55 and dnsdist's 30-74 in the same runs: this is
// what brings nxdns back level with its peers. The socket is
// non-blocking (the runtime's poller owns it), so neither call ever
// blocks: an empty queue or a full send buffer is EAGAIN, and
// syscall.RawConn's Read and Write then park the goroutine on the poller as
// the standard library does. A raw call that cannot block needs no
// entersyscall. Re-measure with
//
//	BASE=<commit before> scripts/workperquery.sh "nxdns unbound dnsdist"
//
// and compare the "hit: CPU µs/query" column.
//
// Why unsafe, here and in no other file of the package: the kernel reads
// and fills a struct msghdr, which points at the iovec, the buffers and the
// peer's sockaddr; x/sys/unix has the types but no call that takes them
// without the standard library's path. Every pointer the header holds is
// to memory the same udpMsg or the caller's slices keep alive across the
// call, and none of it is on a goroutine stack.
//
// The control messages (PKTINFO, the drop count) are the caller's bytes in
// and out of read and write, as with the standard library's calls
// (udpsrc.go, udpdrops.go); send builds its source-address message itself.
type rawUDP struct {
	c   *net.UDPConn
	rc  syscall.RawConn // nil when the socket has none: c's own calls
	v6  bool            // an AF_INET6 socket: IPv4 peers are v4-mapped
	in  udpMsg          // the reader's
	out udpMsg          // the reader's answers
}

// newRawUDP wraps c for its one reader. If c's descriptor cannot be
// reached, it uses c's own calls.
func newRawUDP(c *net.UDPConn) *rawUDP {
	r := &rawUDP{c: c}
	rc, err := c.SyscallConn()
	if err != nil {
		return r
	}
	domain, serr := unix.AF_INET, error(nil)
	if err := rc.Control(func(fd uintptr) {
		domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	}); err != nil || serr != nil {
		return r
	}
	r.rc, r.v6 = rc, domain == unix.AF_INET6
	r.in.init(unix.SYS_RECVMSG)
	r.out.init(unix.SYS_SENDMSG)
	return r
}

// udpMsg is one call's header and the peer's address; a udpMsg serves one
// goroutine at a time.
type udpMsg struct {
	h     unix.Msghdr
	iov   unix.Iovec
	name  unix.RawSockaddrInet6 // a sockaddr_in fits in its first bytes
	n     int
	errno syscall.Errno
	call  func(fd uintptr) bool // made once: passing it allocates nothing
	oob   []byte                // send's source-address control message
}

func (m *udpMsg) init(trap uintptr) {
	m.call = func(fd uintptr) bool {
		for {
			n, _, e := unix.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&m.h)), 0)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false // the poller waits for the socket
			}
			m.n, m.errno = int(n), e
			return true
		}
	}
}

// set points the header at b and oob, and at the peer's address.
func (m *udpMsg) set(b, oob []byte, namelen uint32) {
	m.iov = unix.Iovec{Base: unsafe.SliceData(b)}
	m.iov.SetLen(len(b))
	m.h = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&m.name)), Namelen: namelen, Iov: &m.iov}
	m.h.SetIovlen(1)
	if len(oob) > 0 {
		m.h.Control = unsafe.SliceData(oob)
		m.h.SetControllen(len(oob))
	}
}

// read is ReadMsgUDPAddrPort. Only the socket's reader calls it.
func (r *rawUDP) read(buf, oob []byte) (n, oobn, flags int, from netip.AddrPort, err error) {
	if r.rc == nil {
		return r.c.ReadMsgUDPAddrPort(buf, oob)
	}
	m := &r.in
	m.name = unix.RawSockaddrInet6{}
	m.set(buf, oob, unix.SizeofSockaddrInet6)
	if err := r.rc.Read(m.call); err != nil {
		return 0, 0, 0, from, err // closed: net.ErrClosed, as the standard library's
	}
	if m.errno != 0 {
		return 0, 0, 0, from, &net.OpError{Op: "read", Net: "udp", Source: r.c.LocalAddr(), Err: os.NewSyscallError("recvmsg", m.errno)}
	}
	return m.n, int(m.h.Controllen), int(m.h.Flags), m.peer(), nil
}

// peer is the address recvmsg filled in; a link-local IPv6 peer's scope id
// becomes its zone, the interface's name, as the standard library's.
func (m *udpMsg) peer() netip.AddrPort {
	switch m.name.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&m.name))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port(&sa.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(m.name.Addr)
		if m.name.Scope_id != 0 {
			a = a.WithZone(zoneName(m.name.Scope_id))
		}
		return netip.AddrPortFrom(a, port(&m.name.Port))
	}
	return netip.AddrPort{} // no address: port 0, which deliverable refuses
}

// write is WriteMsgUDPAddrPort with the reader's own header. Only the
// socket's reader calls it; any other goroutine calls send.
func (r *rawUDP) write(b, oob []byte, to netip.AddrPort) error {
	return r.writeWith(&r.out, b, oob, to)
}

// send is write from any goroutine, from the address src (the zero Addr:
// the kernel's choice; udpsrc.go). Each call takes a header of its own,
// with room for the source-address control message, from sendMsgs and puts
// it back after its system call: the workers' sends reuse a few headers
// rather than make one each, and no two sends hold the same one at once.
func (r *rawUDP) send(b []byte, src netip.Addr, to netip.AddrPort) error {
	m := sendMsgs.Get().(*udpMsg)
	m.oob = appendSourceOOB(m.oob[:0], src)
	err := r.writeWith(m, b, m.oob, to)
	m.h, m.iov = unix.Msghdr{}, unix.Iovec{} // keep no pointer to b once sent
	sendMsgs.Put(m)
	return err
}

// sendMsgs are send's headers, each made once (its call closure and its
// control-message buffer with it) and kept for the next send; a sync.Pool
// hands each to one caller until it is put back.
var sendMsgs = sync.Pool{New: func() any {
	m := &udpMsg{oob: make([]byte, 0, oobSize)}
	m.init(unix.SYS_SENDMSG)
	return m
}}

// writeWith writes b with header m; m is unused when c has no raw calls.
func (r *rawUDP) writeWith(m *udpMsg, b, oob []byte, to netip.AddrPort) error {
	if r.rc == nil {
		_, _, err := r.c.WriteMsgUDPAddrPort(b, oob, to)
		return err
	}
	namelen := uint32(unix.SizeofSockaddrInet6)
	a := to.Addr()
	switch {
	case r.v6:
		// An IPv4 peer of a dual-stack socket is v4-mapped (As16).
		m.name = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16(), Scope_id: zoneIndex(a.Zone())}
		setPort(&m.name.Port, to.Port())
	case a.Unmap().Is4():
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(&m.name))
		*sa = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		setPort(&sa.Port, to.Port())
		namelen = unix.SizeofSockaddrInet4
	default:
		return &net.OpError{Op: "write", Net: "udp", Source: r.c.LocalAddr(), Addr: net.UDPAddrFromAddrPort(to), Err: &net.AddrError{Err: "non-IPv4 address", Addr: a.String()}}
	}
	m.set(b, oob, namelen)
	if err := r.rc.Write(m.call); err != nil {
		return err
	}
	if m.errno != 0 {
		return &net.OpError{Op: "write", Net: "udp", Source: r.c.LocalAddr(), Addr: net.UDPAddrFromAddrPort(to), Err: os.NewSyscallError("sendmsg", m.errno)}
	}
	return nil
}

// port and setPort read and write a sockaddr's port, in network byte order.
func port(p *uint16) uint16 { return binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(p))[:]) }

func setPort(p *uint16, v uint16) { binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(p))[:], v) }

// A link-local peer's zone is its interface's name, as the standard
// library gives it; the last one seen is kept, so that a household's
// link-local clients, all on one interface, cost no lookup per datagram.
// An index with no interface is its number, as in the standard library.
type zone struct {
	index uint32
	name  string
}

var lastZone atomic.Pointer[zone]

func zoneName(index uint32) string {
	if z := lastZone.Load(); z != nil && z.index == index {
		return z.name
	}
	name := strconv.FormatUint(uint64(index), 10)
	if ifi, err := net.InterfaceByIndex(int(index)); err == nil {
		name = ifi.Name
	}
	lastZone.Store(&zone{index, name})
	return name
}

func zoneIndex(name string) uint32 {
	if name == "" {
		return 0
	}
	if z := lastZone.Load(); z != nil && z.name == name {
		return z.index
	}
	if ifi, err := net.InterfaceByName(name); err == nil {
		lastZone.Store(&zone{uint32(ifi.Index), name})
		return uint32(ifi.Index)
	}
	n, _ := strconv.ParseUint(name, 10, 32)
	return uint32(n)
}
