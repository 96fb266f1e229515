package server

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
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
// control message; the zero Addr when there is none.
func packetDst(oob []byte) netip.Addr {
	if len(oob) == 0 {
		return netip.Addr{}
	}
	var cm6 ipv6.ControlMessage
	if cm6.Parse(oob) == nil && cm6.Dst != nil {
		if a, ok := netip.AddrFromSlice(cm6.Dst); ok {
			return a
		}
	}
	var cm4 ipv4.ControlMessage
	if cm4.Parse(oob) == nil && cm4.Dst != nil {
		if a, ok := netip.AddrFromSlice(cm4.Dst); ok {
			return a
		}
	}
	return netip.Addr{}
}

// sourceOOB is the control message that sends an answer from src; nil for
// the zero Addr (let the kernel choose). An IPv4 source, mapped or not, uses
// the IPv4 option: that is the one Linux applies to a v4-mapped destination
// on a dual-stack socket.
func sourceOOB(src netip.Addr) []byte {
	if !src.IsValid() {
		return nil
	}
	if src.Is4() || src.Is4In6() {
		cm := ipv4.ControlMessage{Src: src.Unmap().AsSlice()}
		return cm.Marshal()
	}
	cm := ipv6.ControlMessage{Src: src.AsSlice()}
	return cm.Marshal()
}
