// Package rebind is the rebinding protection of the upstream pools
// (docs/protocol.md "Rebinding protection"): an upstream's answer that
// points a public name at an address inside the household — private,
// unique local, loopback, link-local, unspecified or shared (CGNAT) — is
// refused, so a web page cannot make the browser talk to the router or
// the NAS under the page's own name (DNS rebinding).
//
// It is a leaf: the composition root hands a Guard to the server's route,
// which checks the pools' answers only. Forward zones answer the LAN's own
// names, and local records never reach the route.
package rebind

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Options configure a Guard.
type Options struct {
	// Allow are names (lower case, no trailing dot) whose answers pass,
	// each with every name below it (dns.rebinding_allow).
	Allow []string
	// Allowed, when set, allows more names the same way: the dashboard's
	// allow button (filter.Engine.DashboardAllows).
	Allowed func(name string) bool
	// NXDomain answers a refused answer NXDOMAIN; otherwise SERVFAIL
	// (dns.rebinding_answer).
	NXDomain bool
}

// Guard checks answers. It is immutable and safe for concurrent use.
type Guard struct {
	allow    map[string]bool
	allowed  func(string) bool
	nxdomain bool
}

// New returns a Guard.
func New(o Options) *Guard {
	g := &Guard{allow: map[string]bool{}, allowed: o.Allowed, nxdomain: o.NXDomain}
	for _, n := range o.Allow {
		g.allow[strings.ToLower(strings.TrimSuffix(n, "."))] = true
	}
	return g
}

// shared is RFC 6598's shared address space (carrier-grade NAT), which
// also numbers overlay networks on the household's own devices (a
// Tailscale tailnet).
var shared = netip.MustParsePrefix("100.64.0.0/10")

// nat64 is RFC 6052's well-known NAT64 prefix: its last 32 bits are an
// IPv4 address, checked as one.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// thisNetwork is RFC 1122's "this network" 0.0.0.0/8: Linux connects to
// 0.0.0.0 as to the host itself.
var thisNetwork = netip.MustParsePrefix("0.0.0.0/8")

// Internal reports whether a is an address inside the household that no
// public name should point at: RFC 1918 and RFC 4193 (unique local),
// loopback, link-local, unspecified and "this network", RFC 6598 shared
// space, and those inside IPv4-mapped and NAT64 addresses.
func Internal(a netip.Addr) bool {
	a = a.Unmap()
	if a.Is6() && nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	return a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsUnspecified() ||
		a.Is4() && (shared.Contains(a) || thisNetwork.Contains(a))
}

// Allows reports whether name (any case, trailing dot or not) or a name
// above it is allowed.
func (g *Guard) Allows(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if g.allowed != nil && g.allowed(name) {
		return true
	}
	for n := name; ; {
		if g.allow[n] {
			return true
		}
		_, rest, ok := strings.Cut(n, ".")
		if !ok {
			return false
		}
		n = rest
	}
}

// Check returns the answer to send instead of resp, and true, when resp
// must be refused: one of its answer records — an A, an AAAA, or an
// HTTPS/SVCB address hint, whoever owns it, so every step of a CNAME
// chain counts — carries an internal address, and the query's name is
// not allowed. The allow list is matched against the name asked only: a
// CNAME from a public name into an allowed one is still a public name
// pointing inside. An answer that mixes public and internal addresses is
// refused whole: the client would try the internal one as readily as the
// others.
func (g *Guard) Check(q, resp *dns.Msg) (*dns.Msg, bool) {
	if resp == nil || len(q.Question) != 1 {
		return nil, false
	}
	bad, ok := internalIn(resp.Answer)
	if !ok || g.Allows(q.Question[0].Name) {
		return nil, false
	}
	return g.refusal(q, bad), true
}

// internalIn returns the first internal address in rrs.
func internalIn(rrs []dns.RR) (netip.Addr, bool) {
	for _, rr := range rrs {
		for _, ip := range addresses(rr) {
			if a, ok := netip.AddrFromSlice(ip); ok && Internal(a) {
				return a.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}

// addresses are the addresses a record hands a client.
func addresses(rr dns.RR) []net.IP {
	switch r := rr.(type) {
	case *dns.A:
		return []net.IP{r.A}
	case *dns.AAAA:
		return []net.IP{r.AAAA}
	case *dns.HTTPS:
		return hints(r.Value)
	case *dns.SVCB:
		return hints(r.Value)
	}
	return nil
}

func hints(kvs []dns.SVCBKeyValue) []net.IP {
	var out []net.IP
	for _, kv := range kvs {
		switch h := kv.(type) {
		case *dns.SVCBIPv4Hint:
			out = append(out, h.Hint...)
		case *dns.SVCBIPv6Hint:
			out = append(out, h.Hint...)
		}
	}
	return out
}

// EDECode is the Extended DNS Error a refused answer carries: 15
// "Blocked" (RFC 8914 §4.16), "blocked due to a security policy
// implemented on the server being directly talked to". Not 17
// "Filtered", which is a filter the client asked for, nor 18
// "Prohibited", which is about the client's authorisation; the text says
// it was rebinding protection, not a block list.
const EDECode = dns.ExtendedErrorCodeBlocked

// refusal is the answer for a refused one: SERVFAIL or NXDOMAIN, with no
// records, and EDE 15 naming the address and the way to allow the name.
func (g *Guard) refusal(q *dns.Msg, bad netip.Addr) *dns.Msg {
	m := new(dns.Msg)
	rcode := dns.RcodeServerFailure
	if g.nxdomain {
		rcode = dns.RcodeNameError
	}
	m.SetRcode(q, rcode)
	m.RecursionAvailable = true
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(dns.DefaultMsgSize)
	opt.Option = append(opt.Option, &dns.EDNS0_EDE{
		InfoCode:  EDECode,
		ExtraText: fmt.Sprintf("rebinding protection: the upstream answered %s, an internal address (allow the name with dns.rebinding_allow)", bad),
	})
	m.Extra = append(m.Extra, opt)
	return m
}
