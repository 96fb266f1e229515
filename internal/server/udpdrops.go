package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"syscall"
)

// Kernel receive-queue drops. When nxdns cannot read datagrams as fast as
// they arrive, the kernel drops them at the socket and nxdns never sees
// them; docs/design.md#robustness wants those counted too. With SO_RXQ_OVFL set, Linux puts
// the socket's cumulative drop count in a control message on each datagram
// read, so the count is read for free with the datagrams themselves.

// udpReadBuffer is the receive buffer asked for each UDP socket. The
// default (208 KiB, about 270 small datagrams) is 13 ms of a 20 000 qps
// flood: a reader descheduled that long on a busy 2-core Pi drops everyone's
// queries at the socket, the normal client's with the flooder's. 2 MiB rides
// out a quarter second of such a stall; it is memory only while queued.
const udpReadBuffer = 2 << 20

// overflowOOBSize is the control-message space for the drop count.
var overflowOOBSize = syscall.CmsgSpace(4)

// enableOverflow asks the kernel for the drop count on c's datagrams.
func enableOverflow(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return setSocketOption(rc, syscall.SO_RXQ_OVFL)
}

// setSocketOption turns the SOL_SOCKET option opt on for rc's socket.
func setSocketOption(rc syscall.RawConn, opt int) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 1)
	}); err != nil {
		return err
	}
	return serr
}

// kernelDrops follows one socket's cumulative drop count. Each socket has
// one reader, but the count stays safe for several: each datagram's count
// is compared with the newest seen by any reader, so a drop is counted
// once, whichever reader's datagram reports it first.
type kernelDrops struct {
	last atomic.Uint32
}

// update reads the count from a datagram's control messages and returns the
// drops not yet counted (0 when the message carries none: the kernel adds
// it only once the socket has dropped something).
func (k *kernelDrops) update(oob []byte) uint64 {
	for level, typ, data, rest, ok := nextControl(oob); ok; level, typ, data, rest, ok = nextControl(rest) {
		if level == syscall.SOL_SOCKET && typ == syscall.SO_RXQ_OVFL && len(data) >= 4 {
			return k.advance(binary.NativeEndian.Uint32(data))
		}
	}
	return 0
}

// advance moves the count seen to n and returns by how much it moved; an n
// older than the newest seen (another reader's datagram was later) moves
// nothing. Differences are taken modulo 2^32, so the count may wrap.
func (k *kernelDrops) advance(n uint32) uint64 {
	for {
		last := k.last.Load()
		d := int32(n - last)
		if d <= 0 {
			return 0
		}
		if k.last.CompareAndSwap(last, n) {
			return uint64(d)
		}
	}
}

// deliverable reports whether a datagram can be answered at all: not from
// source port 0 (no answer can reach it), not from an address that cannot
// be a client's (unspecified, multicast, broadcast), not sent to a
// broadcast or multicast address (an answer from there is refused by the
// kernel, and a broadcast query is never meant for one server). docs/design.md#robustness:
// dropped before any work, so nothing is forwarded upstream for them.
func deliverable(from netip.AddrPort, dst netip.Addr, broadcasts []netip.Addr) bool {
	src := from.Addr().Unmap()
	switch {
	case from.Port() == 0, !src.IsValid(), src.IsUnspecified(), src.IsMulticast(), isBroadcast(src, broadcasts):
		return false
	case dst.IsValid() && (dst.Unmap().IsMulticast() || isBroadcast(dst.Unmap(), broadcasts)):
		return false
	}
	return true
}

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

func isBroadcast(a netip.Addr, broadcasts []netip.Addr) bool {
	if a == limitedBroadcast {
		return true
	}
	for _, b := range broadcasts {
		if a == b {
			return true
		}
	}
	return false
}

// localBroadcasts are the directed broadcast addresses of the host's IPv4
// networks (the last address of each prefix up to /30), read when a
// wildcard socket is bound. A network added later is still covered by its
// limited broadcast, and its directed one costs at worst an answer the
// kernel refuses.
func localBroadcasts() []netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
			continue
		}
		b := p.Masked().Addr().As4()
		host := uint32(1)<<(32-p.Bits()) - 1
		v := binary.BigEndian.Uint32(b[:]) | host
		binary.BigEndian.PutUint32(b[:], v)
		out = append(out, netip.AddrFrom4(b))
	}
	return out
}
