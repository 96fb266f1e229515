package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// OverrideListen replaces dns.listen with addrs, the addresses given to
// `nxdns run --listen`, when there are any, and checks them under the path
// "--listen[i]". A file's own dns.listen is then ignored, on reload too, so
// the forward zones' loop check (a resolver that is nxdns itself) runs
// again against addrs, reported at the zone's resolver path.
func (c *Config) OverrideListen(addrs []string) Problems {
	if len(addrs) == 0 {
		return nil
	}
	var ps Problems
	checkListenAt(&ps, "--listen", addrs)
	checkLoops(&ps, c.ForwardZones, "--listen", addrs)
	if len(ps) == 0 {
		c.DNS.Listen = slices.Clone(addrs)
	}
	return ps
}

// portProblem explains a host:port that netip rejects although its host is an
// IP address: the port is then what is wrong, and saying "want an IP
// address" would send the operator looking in the wrong place. It returns ""
// when the host is the problem (or nothing is).
func portProblem(s string) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return ""
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return ""
	}
	n, err := strconv.Atoi(port)
	switch {
	case port == "":
		return "no port after the address"
	case err != nil && strings.Trim(port, "0123456789") == "":
		return fmt.Sprintf("port %s is out of range: ports are 1 to 65535", port) // too long for an int
	case err != nil:
		return fmt.Sprintf("port %q is not a number (1 to 65535)", port)
	case n < 1 || n > 65535:
		return fmt.Sprintf("port %d is out of range: ports are 1 to 65535", n)
	}
	return ""
}
