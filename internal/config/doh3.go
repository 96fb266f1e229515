package config

import (
	"fmt"
	"strings"
)

// DoH over HTTP/3 (issue 37; docs/reference/configuration.md): upstreams
// and forward-zone resolvers h3://IP[:PORT]/path with the rules of an
// https:// URL, and [tls] doh3_listen, the UDP addresses DoH is served on
// over HTTP/3 beside doh_listen.

// dohScheme reports whether an upstream URL scheme is DoH's, over HTTP/2
// (https) or HTTP/3 (h3): both need a path and may carry a query.
func dohScheme(scheme string) bool { return scheme == "https" || scheme == "h3" }

// schemeHint is a did-you-mean for a mistyped upstream scheme, "" when
// nothing is close: the common slips are HTTP/3's other names.
func schemeHint(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http3", "doh3", "https3", "h3s":
		return `; did you mean "h3"?`
	case "doq":
		return `; did you mean "quic"?`
	case "dot":
		return `; did you mean "tls"?`
	case "doh", "http":
		return `; did you mean "https"?`
	}
	return ""
}

// checkDoH3Listen applies tls.doh3_listen's rules: valid IP:port addresses
// (443 when the port is left out), none twice, and none on a UDP port that
// dns.listen or tls.doq_listen binds. TCP listeners on the same port do not
// collide: doh_listen and doh3_listen share 443 by design, which is what
// lets the Alt-Svc header of the DoH/2 answers name the same port.
func checkDoH3Listen(ps *Problems, t TLS, dnsListen []string) {
	var taken []bound
	for i, s := range dnsListen { // already reported by checkListen when invalid
		if ap, msg := parseListen(s, "53"); msg == "" {
			taken = append(taken, bound{ap, fmt.Sprintf("dns.listen[%d]", i)})
		}
	}
	for i, s := range t.DoQListen { // already reported by checkDoQListen when invalid
		if ap, msg := parseListen(s, "853"); msg == "" {
			taken = append(taken, bound{ap, fmt.Sprintf("tls.doq_listen[%d]", i)})
		}
	}
	checkTLSListen(ps, "tls.doh3_listen", "443", t.DoH3Listen, taken)
}
