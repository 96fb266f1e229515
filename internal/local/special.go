package local

import (
	"slices"
	"strconv"
	"strings"
)

// kind is what a special-use name gets (docs/design.md#special-names).
type kind uint8

const (
	kindNone        kind = iota
	kindNXDomain         // a locally served empty zone: NXDOMAIN below the apex (RFC 6303 §3)
	kindLoopback         // localhost: A 127.0.0.1, AAAA ::1 (RFC 6761 §6.3)
	kindGuardNX          // use-application-dns.net: NXDOMAIN, Firefox keeps the LAN's resolver
	kindGuardNoData      // resolver.arpa: NODATA unless nxdns serves DoT/DoH (RFC 9462)
)

// privateZones are the zones nxdns serves as empty zones so their names
// never reach a public upstream: the reverse zones of RFC 6303 §4 (RFC 1918,
// loopback, link-local, "this network", the documentation and CGNAT
// prefixes of RFC 7793, ULA, the IPv6 loopback and unspecified addresses),
// the special-use names of RFC 6761 §6 and RFC 7686 (invalid, onion; not
// "test": test setups serve it from real resolvers, and it names nothing of
// the household),
// mDNS's local (RFC 6762 §3) and home.arpa (RFC 8375).
var privateZones = func() map[string]kind {
	m := map[string]kind{
		"10.in-addr.arpa.":              kindNXDomain,
		"168.192.in-addr.arpa.":         kindNXDomain,
		"0.in-addr.arpa.":               kindNXDomain,
		"127.in-addr.arpa.":             kindNXDomain,
		"254.169.in-addr.arpa.":         kindNXDomain,
		"2.0.192.in-addr.arpa.":         kindNXDomain,
		"100.51.198.in-addr.arpa.":      kindNXDomain,
		"113.0.203.in-addr.arpa.":       kindNXDomain,
		"255.255.255.255.in-addr.arpa.": kindNXDomain,
		"d.f.ip6.arpa.":                 kindNXDomain, // fd00::/8, ULA
		"c.f.ip6.arpa.":                 kindNXDomain, // fc00::/8, ULA
		"8.e.f.ip6.arpa.":               kindNXDomain, // fe80::/10, link-local
		"9.e.f.ip6.arpa.":               kindNXDomain,
		"a.e.f.ip6.arpa.":               kindNXDomain,
		"b.e.f.ip6.arpa.":               kindNXDomain,
		"8.b.d.0.1.0.0.2.ip6.arpa.":     kindNXDomain, // 2001:db8::/32, documentation
		"invalid.":                      kindNXDomain,
		"onion.":                        kindNXDomain,
		"local.":                        kindNXDomain,
		"home.arpa.":                    kindNXDomain,
		"localhost.":                    kindLoopback,
	}
	for i := 16; i <= 31; i++ { // 172.16.0.0/12
		m[strconv.Itoa(i)+".172.in-addr.arpa."] = kindNXDomain
	}
	for i := 64; i <= 127; i++ { // 100.64.0.0/10, shared address space (RFC 7793)
		m[strconv.Itoa(i)+".100.in-addr.arpa."] = kindNXDomain
	}
	// ::/128 and ::1/128 (RFC 6303 §4.3, §4.4): 31 zero nibbles and a 0 or 1.
	zeros := strings.Repeat("0.", 31)
	m["0."+zeros+"ip6.arpa."] = kindNXDomain
	m["1."+zeros+"ip6.arpa."] = kindNXDomain
	return m
}()

// guardZones are the bypass guards (docs/design.md#bypass-guards).
var guardZones = map[string]kind{
	"use-application-dns.net.": kindGuardNX,
	"resolver.arpa.":           kindGuardNoData,
}

// specialZones are the guard and the private zones in one map, so a
// question's name is walked once for both: no zone of one is at or below a
// zone of the other (TestSpecialZones_guardsAndPrivateZonesAreApart), so
// the one zone found is the one either walk would find.
var specialZones = func() map[string]kind {
	m := make(map[string]kind, len(privateZones)+len(guardZones))
	for z, k := range privateZones {
		m[z] = k
	}
	for z, k := range guardZones {
		m[z] = k
	}
	return m
}()

// specialTLDs are the last labels of specialZones' zones ("arpa.",
// "local.", "net.", …): a name under none of them is under no special zone,
// which a few string compares tell before any map lookup. Nearly every
// name a household asks ends in another label, so the walk below is for
// the few that do not.
var specialTLDs = func() []string {
	var out []string
	for z := range specialZones {
		if t := lastLabel(z); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}()

// lastLabel is the last label of a fully qualified name with its dot:
// "net." for "use-application-dns.net.", name itself for "localhost.".
func lastLabel(name string) string {
	return name[strings.LastIndexByte(strings.TrimSuffix(name, "."), '.')+1:]
}

// match returns the zone of m (specialZones, or a part of it) that name
// (lower-case, fully qualified) is at or below, walking name's label
// suffixes from the longest: one map lookup per label, whatever the
// number of zones, once the last label is one of specialTLDs.
func match(m map[string]kind, name string) (zone string, k kind) {
	if !slices.Contains(specialTLDs, lastLabel(name)) {
		return "", kindNone
	}
	return walkSuffixes(m, name)
}

// walkSuffixes is match without the last-label check: every suffix of name
// looked up in m, from the longest.
func walkSuffixes(m map[string]kind, name string) (zone string, k kind) {
	for off := 0; off < len(name); {
		if k, ok := m[name[off:]]; ok {
			return name[off:], k
		}
		i := strings.IndexByte(name[off:], '.')
		if i < 0 {
			break
		}
		off += i + 1
	}
	return "", kindNone
}

// singleLabel reports whether name (fully qualified) is one label below the
// root: "nas.", not "." and not "nas.home.".
func singleLabel(name string) bool {
	return name != "." && strings.IndexByte(name, '.') == len(name)-1
}
