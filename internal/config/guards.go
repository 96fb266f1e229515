package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// Rebinding protection and the per-device rate limit: [dns]
// rebinding_protection, rebinding_allow, rebinding_answer, rate_limit_qps,
// rate_limit_burst and rate_limit_exempt (docs/reference/configuration.md,
// docs/protocol.md "Rebinding protection" and "Rate limit").

// The rebinding answers (dns.rebinding_answer).
const (
	RebindingServfail = "servfail"
	RebindingNXDomain = "nxdomain"
)

// The rate limit's defaults and bounds. A phone or TV waking up sends a
// few hundred queries at once (docs/design.md#lesson-bursts); the default
// burst holds three such bursts back to back, and the rate refills it in
// twenty seconds. A flood past it costs one REFUSED each.
const (
	DefaultRateLimitQPS   = 50
	DefaultRateLimitBurst = 1000
	maxRateLimitQPS       = 1_000_000
	maxRateLimitBurst     = 1_000_000
)

// DefaultRateLimitExempt is rate_limit_exempt's default: the host itself,
// where a local forwarder (dnsmasq on the same router) sends the whole
// LAN's queries from.
var DefaultRateLimitExempt = []string{"127.0.0.0/8", "::1/128"}

// Rebinding reports whether upstream answers are checked for private
// addresses (dns.rebinding_protection, on unless set false).
func (d DNS) Rebinding() bool { return d.RebindingProtection == nil || *d.RebindingProtection }

// RebindingAllowed are rebinding_allow's names, lower case, without the
// trailing dot: each allows itself and every name below it.
func (d DNS) RebindingAllowed() []string {
	out := make([]string, 0, len(d.RebindingAllow))
	for _, n := range d.RebindingAllow {
		out = append(out, strings.ToLower(strings.TrimSuffix(n, ".")))
	}
	return out
}

// RateExempt are rate_limit_exempt's prefixes (an address is its /32 or
// /128), masked and unmapped, and the trusted forwarders': a router that
// forwards for the whole LAN is one source for every device, so a trusted
// one is never limited as if it were one (docs/devices.md).
func (d DNS) RateExempt() []netip.Prefix {
	out := d.TrustedForwarderPrefixes()
	for _, s := range d.RateLimitExempt {
		if p, ok := parseAddrOrPrefix(s); ok {
			out = append(out, p)
		}
	}
	return out
}

// parseAddrOrPrefix reads an IP address (as its one-address prefix) or a
// CIDR prefix.
func parseAddrOrPrefix(s string) (netip.Prefix, bool) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true
	}
	if p, err := netip.ParsePrefix(s); err == nil {
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), true
	}
	return netip.Prefix{}, false
}

func checkGuards(ps *Problems, d DNS) {
	for i, n := range d.RebindingAllow {
		if !validZone(n) {
			ps.add(fmt.Sprintf("dns.rebinding_allow[%d]", i), CodeInvalidName, "%q is not a domain name", n)
		}
	}
	switch d.RebindingAnswer {
	case "", RebindingServfail, RebindingNXDomain:
	default:
		ps.add("dns.rebinding_answer", CodeInvalidChoice, "%q: want %q or %q", d.RebindingAnswer, RebindingServfail, RebindingNXDomain)
	}
	qpsOK := checkRange(ps, "dns.rate_limit_qps", d.RateLimitQPS, 0, maxRateLimitQPS)
	if checkRange(ps, "dns.rate_limit_burst", d.RateLimitBurst, 1, maxRateLimitBurst) && qpsOK && d.RateLimitBurst < d.RateLimitQPS {
		ps.add("dns.rate_limit_burst", CodeMinAboveMax, "%d is below dns.rate_limit_qps (%d): the bucket must hold at least one second's queries", d.RateLimitBurst, d.RateLimitQPS)
	}
	for i, s := range d.RateLimitExempt {
		if _, ok := parseAddrOrPrefix(s); !ok {
			ps.add(fmt.Sprintf("dns.rate_limit_exempt[%d]", i), CodeInvalidCIDR, "%q is not an IP address or CIDR prefix", s)
		}
	}
}
