package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"slices"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// On a wildcard bind ("0.0.0.0:53", "[::]:53" — the NixOS module's default)
// the kernel picks an answer's source address by route, which need not be
// the address the client asked: a host with a ULA and a SLAAC address, or
// two interfaces, would answer from the wrong one, and the client drops an
// answer from an address it did not query. So a wildcard UDP socket asks for
// each datagram's destination address (IP_PKTINFO / IPV6_PKTINFO) and sends
// the answer from it. A socket bound to one address needs none of this.

// oobSize fits the destination-address control message of either family.
var oobSize = max(len(ipv4.NewControlMessage(ipv4.FlagDst)), len(ipv6.NewControlMessage(ipv6.FlagDst)))

// enablePktinfo asks for destination addresses on c. A dual-stack socket
// takes both options (IPv4 clients arrive v4-mapped); an IPv4 socket refuses
// the IPv6 one, so only both failing is an error.
func enablePktinfo(c *net.UDPConn) error {
	err6 := ipv6.NewPacketConn(c).SetControlMessage(ipv6.FlagDst, true)
	err4 := ipv4.NewPacketConn(c).SetControlMessage(ipv4.FlagDst, true)
	if err4 != nil && err6 != nil {
		return err4
	}
	return nil
}

// packetDst is the destination address a datagram was sent to, from its
// control message; the zero Addr when there is none. It reads the message
// in place: a wildcard socket (the NixOS module's default) reads one per
// datagram, and the fast path allocates nothing.
func packetDst(oob []byte) netip.Addr {
	var v4 netip.Addr
	for level, typ, data, rest, ok := nextControl(oob); ok; level, typ, data, rest, ok = nextControl(rest) {
		switch {
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			return netip.AddrFrom16([16]byte(data[:16])) // in6_pktinfo.ipi6_addr
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			v4 = netip.AddrFrom4([4]byte(data[8:12])) // in_pktinfo.ipi_addr, the header's destination
		}
	}
	return v4
}

// sourceOOB is the control message that sends an answer from src; nil for
// the zero Addr (let the kernel choose).
func sourceOOB(src netip.Addr) []byte { return appendSourceOOB(nil, src) }

// appendSourceOOB appends sourceOOB(src) to b. An IPv4 source, mapped or
// not, uses the IPv4 option: that is the one Linux applies to a v4-mapped
// destination on a dual-stack socket.
func appendSourceOOB(b []byte, src netip.Addr) []byte {
	if !src.IsValid() {
		return b
	}
	if src.Is4() || src.Is4In6() {
		b, data := appendControl(b, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo)
		*(*[4]byte)(data[4:8]) = src.Unmap().As4() // in_pktinfo.ipi_spec_dst: the source to send from
		return b
	}
	b, data := appendControl(b, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo)
	*(*[16]byte)(data[:16]) = src.As16() // in6_pktinfo.ipi6_addr
	return b
}

// The control messages are read and written here by hand, with
// encoding/binary and no unsafe: x/net's ipv4/ipv6 ControlMessage and
// syscall.ParseSocketControlMessage allocate per datagram, and a wildcard
// socket (the NixOS module's default) reads one with every query, cache
// hits included. A struct cmsghdr is cmsg_len, a size_t (8 bytes on 64-bit
// Linux, 4 on 32-bit), then cmsg_level and cmsg_type, an int each; the
// kernel aligns each header to a size_t.

// cmsgLenSize is the width of cmsg_len: the header less level and type.
const cmsgLenSize = unix.SizeofCmsghdr - 8

// nextControl splits the first control message off oob: its level, type
// and data, and the messages after it; ok is false when none is left or
// the header is malformed.
func nextControl(oob []byte) (level, typ int32, data, rest []byte, ok bool) {
	if len(oob) < unix.SizeofCmsghdr {
		return 0, 0, nil, nil, false
	}
	var n uint64
	if cmsgLenSize == 8 {
		n = binary.NativeEndian.Uint64(oob)
	} else {
		n = uint64(binary.NativeEndian.Uint32(oob))
	}
	if n < uint64(unix.CmsgLen(0)) || n > uint64(len(oob)) {
		return 0, 0, nil, nil, false
	}
	level = int32(binary.NativeEndian.Uint32(oob[cmsgLenSize:]))
	typ = int32(binary.NativeEndian.Uint32(oob[cmsgLenSize+4:]))
	next := min(unix.CmsgSpace(int(n)-unix.CmsgLen(0)), len(oob))
	return level, typ, oob[unix.CmsgLen(0):n], oob[next:], true
}

// appendControl appends a control message of size bytes, zeroed, and
// returns the message and its data to fill in.
func appendControl(b []byte, level, typ int32, size int) ([]byte, []byte) {
	start := len(b)
	b = slices.Grow(b, unix.CmsgSpace(size))[:start+unix.CmsgSpace(size)]
	h := b[start:]
	clear(h)
	if cmsgLenSize == 8 {
		binary.NativeEndian.PutUint64(h, uint64(unix.CmsgLen(size)))
	} else {
		binary.NativeEndian.PutUint32(h, uint32(unix.CmsgLen(size)))
	}
	binary.NativeEndian.PutUint32(h[cmsgLenSize:], uint32(level))
	binary.NativeEndian.PutUint32(h[cmsgLenSize+4:], uint32(typ))
	return b, h[unix.CmsgLen(0):unix.CmsgLen(size)]
}
