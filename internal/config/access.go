package config

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// The accessors below turn a Config that Validate accepted into the values
// the rest of nxdns uses. On an invalid Config they skip what does not parse
// rather than fail: validity is Validate's job, and said once.

// Attempt is the time one attempt against one upstream may take, connect
// included.
func (u Upstream) Attempt() time.Duration { return ms(u.AttemptTimeoutMS) }

// Total is the pool's budget for one query: every wait and attempt together.
func (u Upstream) Total() time.Duration { return ms(u.TotalTimeoutMS) }

// Read is the budget of one whole forward-zone exchange.
func (u Upstream) Read() time.Duration { return ms(u.ReadTimeoutMS) }

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// MinTTL is the shortest TTL the cache keeps an answer for.
func (d DNS) MinTTL() time.Duration { return seconds(d.CacheMinTTL) }

// MaxTTL is the longest TTL the cache keeps an answer for.
func (d DNS) MaxTTL() time.Duration { return seconds(d.CacheMaxTTL) }

// StaleAge is how long past its expiry an answer may still be served stale;
// 0 disables serve-stale.
func (d DNS) StaleAge() time.Duration { return seconds(d.StaleMaxAge) }

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// Addrs are the listen addresses, in file order.
func (d DNS) Addrs() []netip.AddrPort {
	out := make([]netip.AddrPort, 0, len(d.Listen))
	for _, s := range d.Listen {
		if ap, msg := parseListen(s, "53"); msg == "" {
			out = append(out, ap)
		}
	}
	return out
}

// Allowed are the client networks given as prefixes, masked (192.168.1.7/24
// is 192.168.1.0/24). "local" is not among them: it changes while nxdns runs
// (AllowsLocal).
func (d DNS) Allowed() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(d.Allow))
	for _, s := range d.Allow {
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Addr is the web listener's address; ok is false when web.listen is empty
// (the web server is disabled).
func (w Web) Addr() (addr netip.AddrPort, ok bool) {
	ap, msg := parseListen(w.Listen, "9153")
	return ap, w.Listen != "" && msg == ""
}

// EnabledUpstreams are the upstreams that become pool entries, lowest
// priority first, ties in file order (docs/design.md#config-upstreams). The slice is a copy.
func (c Config) EnabledUpstreams() []UpstreamURL {
	var out []UpstreamURL
	for _, u := range c.Upstreams {
		if u.IsEnabled() {
			out = append(out, u)
		}
	}
	slices.SortStableFunc(out, func(a, b UpstreamURL) int { return cmp.Compare(a.Priority, b.Priority) })
	return out
}

// FQDN is the zone as matching compares it: lower-case, with a trailing dot
// ("LAN" and "lan." are both "lan.").
func (z ForwardZone) FQDN() string { return fqdn(z.Zone) }

// Target is where the zone's queries go: network is NetworkUDP or NetworkTCP,
// addr the resolver's IP and port. Both are zero when Resolver is invalid.
func (z ForwardZone) Target() (network string, addr netip.AddrPort) {
	network, addr, code, _ := parseResolver(z.Resolver)
	if code != "" {
		return "", netip.AddrPort{}
	}
	return network, addr
}

// ClientNames maps each static client's address to its name. IPv4-mapped
// IPv6 addresses are unmapped, as a handler should unmap a query's source.
func (c Config) ClientNames() map[netip.Addr]string {
	out := make(map[netip.Addr]string, len(c.Clients))
	for _, cl := range c.Clients {
		if ip, err := netip.ParseAddr(cl.IP); err == nil {
			out[ip.Unmap()] = cl.Name
		}
	}
	return out
}
