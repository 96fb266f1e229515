package config

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// Forward-zone resolver networks (docs/design.md#forward-zones).
const (
	NetworkUDP = "udp" // one datagram, TC=1 falls back to TCP
	NetworkTCP = "tcp" // straight to TCP
)

func checkZones(ps *Problems, zs []ForwardZone, listen []string) {
	seen := map[string]int{} // FQDN → index
	for i, z := range zs {
		path := fmt.Sprintf("forward_zones[%d]", i)
		switch {
		case z.Zone == "":
			ps.add(path+".zone", CodeRequired, "missing: a forward zone is a zone and a resolver")
		case z.Zone == ".":
			ps.add(path+".zone", CodeInvalidZone, "the root zone: names outside every zone go to the upstreams")
		case !validZone(z.Zone):
			ps.add(path+".zone", CodeInvalidZone,
				"%q is not a domain name (dot-separated labels of letters, digits, - or _, each 1 to 63 bytes)", z.Zone)
		default:
			fq := fqdn(z.Zone)
			if j, dup := seen[fq]; dup {
				ps.add(path+".zone", CodeDuplicate, "%s is already forward_zones[%d].zone", fq, j)
			} else {
				seen[fq] = i
			}
		}
		if z.Resolver == "" {
			ps.add(path+".resolver", CodeRequired, "missing: a forward zone is a zone and a resolver")
		} else if EncryptedResolver(z.Resolver) {
			checkZoneTLS(ps, path, z)
		} else if _, addr, code, msg := parseResolver(z.Resolver); code != "" {
			ps.add(path+".resolver", code, "%q: %s", z.Resolver, msg)
		} else {
			checkLoop(ps, path, z.Resolver, addr, "dns.listen", listen)
		}
		checkZonePlainTLSKeys(ps, path, z)
	}
}

// checkLoops runs the loop check of every forward zone whose resolver
// parses against listen, the addresses that replace dns.listen (named by
// source, e.g. "--listen"): validation checked the file's own, which are
// not served.
func checkLoops(ps *Problems, zs []ForwardZone, source string, listen []string) {
	for i, z := range zs {
		if EncryptedResolver(z.Resolver) {
			continue // not a dns.listen address: see checkZoneTLS
		}
		if _, addr, code, _ := parseResolver(z.Resolver); code == "" {
			checkLoop(ps, fmt.Sprintf("forward_zones[%d]", i), z.Resolver, addr, source, listen)
		}
	}
}

// checkLoop reports a resolver that one of listen (named by source) answers.
func checkLoop(ps *Problems, path, resolver string, addr netip.AddrPort, source string, listen []string) {
	if l, loop := listensOn(listen, addr); loop {
		// One query would come back as another, and again, until the
		// read budget ends: 64 nested queries filled the UDP slots.
		ps.add(path+".resolver", CodeLoop, "%q is nxdns itself (%s %q): the zone's queries would loop", resolver, source, l)
	}
}

// localAddrs are the host's own addresses: a wildcard listen address
// answers on each of them. A variable so tests need not depend on the host;
// an error reading them (a sandbox without interfaces) leaves loopback only.
var localAddrs = func() []netip.Addr {
	ifs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range ifs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// listensOn reports which dns.listen entry, if any, answers at addr: the
// same address and port, or a wildcard of addr's family on that port when
// addr is loopback or one of the host's own addresses. The one impurity of
// Validate: it reads the host's interface addresses (not a file), so a
// resolver set to the Pi's own LAN address under "0.0.0.0:53" is caught.
func listensOn(listen []string, addr netip.AddrPort) (string, bool) {
	var local []netip.Addr
	for _, s := range listen {
		ap, msg := parseListen(s, "53")
		if msg != "" || ap.Port() != addr.Port() {
			continue
		}
		l := ap.Addr().Unmap()
		if l == addr.Addr() {
			return s, true
		}
		if !l.IsUnspecified() || l.Is4() != addr.Addr().Is4() {
			continue
		}
		if addr.Addr().IsLoopback() {
			return s, true
		}
		if local == nil {
			local = append(localAddrs(), netip.Addr{}) // non-nil: read once
		}
		if slices.Contains(local, addr.Addr()) {
			return s, true
		}
	}
	return "", false
}

// parseResolver parses udp://IP:port or tcp://IP:port. The port is mandatory
// (a LAN resolver on another port than 53 must not be reached on 53 by
// accident) and the host an IP literal (nxdns resolves no resolver's name).
// On failure it returns the problem's code and message.
func parseResolver(s string) (network string, addr netip.AddrPort, code Code, msg string) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return "", addr, CodeInvalidResolver, "want udp://IP:port or tcp://IP:port"
	}
	switch network = strings.ToLower(scheme); network {
	case NetworkUDP, NetworkTCP:
	default:
		return "", addr, CodeUnsupportedScheme, fmt.Sprintf("scheme %q: want udp://, tcp://, tls://, https://, quic:// or h3://", scheme)
	}
	addr, err := netip.ParseAddrPort(rest)
	if err != nil {
		if msg := portProblem(rest); msg != "" {
			return "", addr, CodeInvalidResolver, msg
		}
		if _, err := netip.ParseAddr(strings.Trim(rest, "[]")); err == nil {
			return "", addr, CodeInvalidResolver, "the port is mandatory, e.g. " + network + "://192.168.1.1:53"
		}
		return "", addr, CodeInvalidResolver, "want " + network + "://IP:port with an IP address: nxdns resolves no resolver's name"
	}
	if addr.Port() == 0 {
		return "", addr, CodeInvalidResolver, "port 0"
	}
	if m := checkAddr(addr.Addr()); m != "" {
		return "", addr, CodeInvalidResolver, m
	}
	return network, netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()), "", ""
}

// fqdn is the zone as matching compares it: lower-case with a trailing dot.
func fqdn(zone string) string {
	return strings.ToLower(strings.TrimSuffix(zone, ".")) + "."
}

// validZone reports whether s is a domain name a zone can have: labels of
// letters, digits, hyphens and underscores (service zones such as _tcp.lan
// exist), none empty or longer than 63 bytes, 253 bytes in all, one optional
// trailing dot (RFC 1035 §2.3.4).
func validZone(s string) bool { return validName(s, true) }

// validHost is validZone without underscores: a host name as RFC 1123 §2.1
// and certificates (RFC 5280 §4.2.1.6) allow it.
func validHost(s string) bool { return validName(s, false) }

func validName(s string, underscore bool) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' ||
				underscore && c == '_'
			if !ok {
				return false
			}
		}
	}
	return true
}
