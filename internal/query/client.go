package query

import (
	"net"
	"net/netip"
)

// ClientOf is the client a peer's address names, the one way every part of
// nxdns names it (Event.Client, dns.allow, the filter's clients, the
// history, the dashboard's connection caps and login limits): IPv4
// unmapped (a dual-stack socket reports ::ffff:a.b.c.d), and without a
// link-local sender's zone. Configuration names addresses, not interfaces,
// and a zoned address is in no prefix: fe80::1%eth0 would be outside
// fe80::/10, and fe80::1%eth0 and fe80::1%eth1 would be two clients.
func ClientOf(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// ClientOfNet is ClientOf for a connection's net.Addr (a TCP or UDP peer);
// the zero Addr for any other kind.
func ClientOfNet(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.TCPAddr:
		return ClientOf(a.AddrPort().Addr())
	case *net.UDPAddr:
		return ClientOf(a.AddrPort().Addr())
	}
	return netip.Addr{}
}

// ClientOfRemote is ClientOf for an "ip:port" string, an http.Request's
// RemoteAddr (the TCP peer, never a header); the zero Addr when remote does
// not parse.
func ClientOfRemote(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ClientOf(ap.Addr())
}

// ClientShareKey is the unit a per-client share counts (docs/server.md,
// the listeners' client shares; the web endpoint's connection caps): the
// IPv4 address, or the IPv6 /64 the address is in — a host picks any
// address of its /64 at will (privacy addresses, RFC 8981), so counting
// IPv6 addresses one by one would be no bound at all.
func ClientShareKey(a netip.Addr) netip.Prefix {
	a = ClientOf(a)
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	return netip.PrefixFrom(a, 64).Masked()
}
