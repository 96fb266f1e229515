// Package localnet knows the networks this host is directly attached to and
// follows them as interfaces come, go and change addresses: what dns.allow's
// "local" means (docs/design.md#config-allow). A household's LAN prefix comes from DHCP and its
// global IPv6 prefix from the ISP, and either can change under a running
// server; a fixed list in the file would refuse the LAN after a renumbering.
package localnet

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
)

// loopback is always local, whatever the interfaces say: a host without a
// configured lo still answers itself.
var loopback = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("::1/128"),
}

// Prefixes is loopback plus the masked prefix of every address of every
// interface that is up: 192.168.1.2/24 gives 192.168.1.0/24 and
// 2001:db8:1:2::5/64 gives 2001:db8:1:2::/64 (global, ULA and link-local
// alike). The result is sorted and free of duplicates, so two calls compare
// with slices.Equal. An interface that is down is not attached to anything.
func Prefixes() ([]netip.Prefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("localnet: list interfaces: %w", err)
	}
	out := slices.Clone(loopback)
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("localnet: addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if p, ok := prefixOf(a); ok {
				out = append(out, p)
			}
		}
	}
	return normalize(out), nil
}

// prefixOf is an interface address's network. A zone (fe80::1%eth0) is
// dropped: a query's source address carries none, and the prefix matches
// the link-local range on every link, which is what "attached" means there.
func prefixOf(a net.Addr) (netip.Prefix, bool) {
	ipn, ok := a.(*net.IPNet)
	if !ok {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(ipn.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	ones, bits := ipn.Mask.Size()
	if bits == 0 || bits != ip.BitLen() { // a non-canonical mask: nothing sensible to allow
		return netip.Prefix{}, false
	}
	p, err := ip.WithZone("").Prefix(ones)
	return p, err == nil
}

// normalize sorts prefixes (IPv4 first, then by address and length) and
// drops duplicates.
func normalize(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return cmp.Compare(a.Bits(), b.Bits())
	})
	return slices.Compact(ps)
}
