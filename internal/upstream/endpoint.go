// Package upstream is how nxdns talks to its encrypted upstream resolvers: the
// transport vocabulary (endpoints, error kinds and groups, response
// validation), the priority-failover pool with its health and backoff, and
// the DoT, DoH, DoQ and DoH3 clients.
package upstream

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Scheme is an upstream transport.
type Scheme string

const (
	SchemeDoT  Scheme = "tls"   // DNS over TLS, RFC 7858
	SchemeDoH  Scheme = "https" // DNS over HTTPS, RFC 8484
	SchemeDoQ  Scheme = "quic"  // DNS over QUIC, RFC 9250
	SchemeDoH3 Scheme = "h3"    // DNS over HTTPS over HTTP/3, RFC 8484 and RFC 9114
)

// Default ports when the URL gives none.
const (
	portDoT  = 853
	portDoH  = 443
	portDoQ  = 853 // RFC 9250 §4.1.1: UDP port 853
	portDoH3 = 443 // UDP 443, where HTTP/3 servers listen (RFC 9114 §3.1)
)

// Endpoint is one upstream as a transport needs it.
type Endpoint struct {
	Scheme  Scheme
	URL     *url.URL       // the full URL; its path may carry a secret token
	Addr    netip.AddrPort // where to connect; never resolved by name
	TLSName string         // the name the certificate must carry
}

// ParseEndpoint builds an Endpoint from a configured URL and optional address
// and TLS name overrides. It rejects what docs/design.md#config-upstreams forbids so that a transport
// never sees an unusable endpoint; config validation reports the same rules
// with paths and codes.
func ParseEndpoint(rawURL, address, tlsName string) (Endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Endpoint{}, fmt.Errorf("invalid URL: %w", err)
	}
	var ep Endpoint
	var port int
	switch Scheme(u.Scheme) {
	case SchemeDoT:
		ep.Scheme, port = SchemeDoT, portDoT
	case SchemeDoH:
		ep.Scheme, port = SchemeDoH, portDoH
	case SchemeDoQ:
		ep.Scheme, port = SchemeDoQ, portDoQ
	case SchemeDoH3:
		ep.Scheme, port = SchemeDoH3, portDoH3
	default:
		return Endpoint{}, fmt.Errorf("unsupported scheme %q (want tls, https, quic or h3)", u.Scheme)
	}
	if u.User != nil {
		return Endpoint{}, fmt.Errorf("userinfo not allowed")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return Endpoint{}, fmt.Errorf("fragment not allowed")
	}
	host := u.Hostname()
	if host == "" {
		return Endpoint{}, fmt.Errorf("missing host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Endpoint{}, fmt.Errorf("invalid port %q", p)
		}
		port = n
	}
	ip, hostIsIP := netip.ParseAddr(host)
	if hostIsIP != nil {
		ip = netip.Addr{}
	}
	switch {
	case address != "":
		a, err := netip.ParseAddr(address)
		if err != nil {
			return Endpoint{}, fmt.Errorf("address %q is not an IP address", address)
		}
		ip = a
	case !ip.IsValid():
		return Endpoint{}, fmt.Errorf("host %q is a name: address is required", host)
	}
	ep.URL = u
	ep.Addr = netip.AddrPortFrom(ip.Unmap(), uint16(port))
	ep.TLSName = tlsName
	if ep.TLSName == "" {
		ep.TLSName = host
	}
	return ep, nil
}

// Redacted is the endpoint as logs and metrics may show it.
func (e Endpoint) Redacted() string { return Redact(e.URL) }

// Redact keeps scheme, host and port of a URL and drops everything else:
// path and query may carry an account token (docs/design.md#redaction), userinfo a password.
func Redact(u *url.URL) string {
	if u == nil {
		return ""
	}
	host := u.Hostname()
	if u.Port() != "" {
		return u.Scheme + "://" + net.JoinHostPort(host, u.Port())
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
		host = "[" + host + "]"
	}
	return u.Scheme + "://" + host
}

// RedactString redacts a raw URL for a label or a listing; an unparsable one
// is shown as "invalid-url" rather than risk printing a secret. It is Scrub
// applied to the URL's own text, so metrics labels and the health page go
// through the same redaction as logs and errors (the result is always
// Redact(u)).
func RedactString(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "invalid-url"
	}
	return Endpoint{URL: u}.Scrub(u.String())
}

// Scrub is the one redaction of free text (docs/design.md#redaction): s with the
// endpoint's URL shown as Redacted, and every stray copy of its secret parts
// (path, query, userinfo, fragment; escaped or not) replaced by
// "[redacted]". A transport's error may quote the request line or a
// *url.Error the request URL, and a token in a journal cannot be taken back,
// so the pool's backoff log, the DoH client's errors and the metrics labels
// all pass through here. A path of "/" is no secret and is kept.
func (e Endpoint) Scrub(s string) string {
	if e.URL == nil {
		return s
	}
	return scrubber(e.URL).Replace(s)
}

// scrubber replaces the whole URL first (strings.Replacer tries its pairs in
// order at each position), then the parts that may appear alone.
func scrubber(u *url.URL) *strings.Replacer {
	var pairs []string
	if full := u.String(); full != "" { // an empty old string would match everywhere
		pairs = append(pairs, full, Redact(u))
	}
	secret := func(part, with string) {
		if part != "" && part != "/" {
			pairs = append(pairs, part, with)
		}
	}
	secret(u.RequestURI(), "/[redacted]") // path and query, as a request line carries them
	secret(u.EscapedPath(), "/[redacted]")
	secret(u.Path, "/[redacted]")
	secret(u.RawQuery, "[redacted]")
	if u.User != nil { // ParseEndpoint refuses userinfo; a raw URL may carry it
		secret(u.User.String(), "[redacted]")
		if pw, ok := u.User.Password(); ok {
			secret(pw, "[redacted]")
		}
	}
	secret(u.EscapedFragment(), "[redacted]")
	secret(u.Fragment, "[redacted]")
	return strings.NewReplacer(pairs...)
}
