package web

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// DNS rebinding (docs/dashboard.md, "DNS rebinding"): a page in a browser on
// this host or the LAN can make a name of its own resolve to web.listen's
// address, and the browser then treats the endpoint as that page's own
// origin — its scripts read the history and post to the Mutating routes,
// and the Origin check (sameOrigin) passes because Origin and Host carry the
// same foreign name. The Host header is what gives it away: every request is
// checked against the names this endpoint really has, before any route.
//
// Accepted Host values (the port, if any, is not compared — the rebinding
// page reaches the same port):
//   - an IP literal: web.listen's address, or any address when web.listen is
//     a wildcard (0.0.0.0, ::). A page cannot send an IP literal as Host
//     under its own name, so an address is never a rebinding;
//   - "localhost", which browsers resolve to loopback themselves (RFC 6761
//     §6.3);
//   - the names in web.hostnames, for a dashboard reached by name on the LAN;
//   - no Host at all (HTTP/1.0), which no browser sends.
//
// Everything else, a Host that is empty once its port is gone (":80") too, gets 421 Misdirected Request (RFC 9110 §15.5.20) with a
// body that says which key to set.

// hostPolicy is what hostGuard accepts; swapped whole by SetHostnames.
type hostPolicy struct {
	listen   []netip.Addr    // the listeners' addresses (web.listen, web.tls_listen)
	wildcard bool            // a listener on 0.0.0.0 or ::: any IP literal
	names    map[string]bool // lower case, no trailing dot
}

// maxHostInBody bounds how much of a refused Host the 421 body repeats.
const maxHostInBody = 64

func newHostPolicy(addrs []string, hostnames []string) *hostPolicy {
	p := &hostPolicy{names: map[string]bool{"localhost": true}}
	for _, addr := range addrs {
		if addr == "" {
			continue
		}
		if ap, err := netip.ParseAddrPort(addr); err == nil {
			p.listen = append(p.listen, ap.Addr().Unmap().WithZone(""))
			p.wildcard = p.wildcard || ap.Addr().IsUnspecified()
		} else {
			p.wildcard = true // not an IP:port (a test's or a library caller's): names are still checked
		}
	}
	for _, h := range hostnames {
		p.names[normalHost(h)] = true
	}
	return p
}

// normalHost is a Host (or a web.hostnames entry) without port, trailing dot
// and case.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else {
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]") // "[::1]" without a port
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// allows reports whether host (a request's Host) names this endpoint.
func (p *hostPolicy) allows(host string) bool {
	if host == "" {
		return true // HTTP/1.0 without Host: no browser sends that, so no rebinding
	}
	h := normalHost(host)
	if ip, err := netip.ParseAddr(h); err == nil {
		return p.wildcard || slices.Contains(p.listen, ip.Unmap().WithZone(""))
	}
	return p.names[h]
}

// hostGuard refuses requests whose Host is not a name of this endpoint.
type hostGuard struct {
	policy atomic.Pointer[hostPolicy]
	next   http.Handler
}

func (g *hostGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.policy.Load().allows(r.Host) {
		host := r.Host
		if len(host) > maxHostInBody {
			host = host[:maxHostInBody] + "…"
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusMisdirectedRequest)
		w.Write([]byte("nxdns: Host " + strings.ToValidUTF8(quoteHost(host), "?") +
			" is not a name of this endpoint (a DNS rebinding page would look like this).\n" +
			"Use its IP address or localhost, or add the name to web.hostnames (docs/dashboard.md).\n"))
		return
	}
	g.next.ServeHTTP(w, r)
}

func quoteHost(h string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range h {
		if c < 0x20 || c == 0x7f || c == '"' {
			c = '?'
		}
		b.WriteRune(c)
	}
	b.WriteByte('"')
	return b.String()
}

// SetHostnames sets web.hostnames: the names besides the listen address and
// "localhost" a request's Host may carry. Safe at any time (a reload).
func (s *Server) SetHostnames(names []string) {
	s.mu.Lock()
	s.hostnames = names
	s.mu.Unlock()
	s.hosts.policy.Store(newHostPolicy([]string{s.addr, s.tlsAddr}, names))
}
