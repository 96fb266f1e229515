package config

import (
	"fmt"
	"net/netip"
	"slices"
)

// AllowLocal is the dns.allow word for "the networks this host is attached
// to" (docs/design.md#config-allow): loopback plus the prefix of every address on every
// interface, IPv4 and IPv6, global prefixes included. It is the default, so a
// fresh install answers its own LAN, whatever the LAN's addresses, and
// nothing beyond it. The set follows the interfaces while nxdns runs; the
// config package only names it, the watching is internal/localnet's.
const AllowLocal = "local"

func checkAllow(ps *Problems, allow []string) {
	if len(allow) == 0 {
		// An empty list is ambiguous ("nobody" or "everybody"); neither is
		// what a household wants, and everybody would be an open resolver.
		ps.add("dns.allow", CodeRequired, `no allowed network: list the networks to answer, e.g. "local" or 192.168.0.0/16`)
	}
	for i, s := range allow {
		if s == AllowLocal {
			continue
		}
		if _, err := netip.ParsePrefix(s); err != nil {
			hint := ""
			if _, err := netip.ParseAddr(s); err == nil {
				hint = " (one address is a /32 or /128 prefix)"
			}
			ps.add(fmt.Sprintf("dns.allow[%d]", i), CodeInvalidCIDR, `%q is not a CIDR prefix or "local"%s`, s, hint)
		}
	}
}

// AllowsLocal reports whether dns.allow holds "local": the server's allow set
// then includes the host's own networks, followed as interfaces change.
func (d DNS) AllowsLocal() bool { return slices.Contains(d.Allow, AllowLocal) }
