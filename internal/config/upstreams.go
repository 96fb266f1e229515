package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxUpstreams is the most enabled upstreams the pool takes: its compiled
// bound (docs/design.md#config-upstreams). Disabled upstreams do not count.
const MaxUpstreams = 64

// Default ports when an upstream URL gives none.
const (
	portDoT = "853" // RFC 7858 §3.1
	portDoH = "443"
	portDoQ = "853" // RFC 9250 §4.1.1, over UDP
)

// checkUpstreams applies the rules of each [[upstreams]] entry and the
// cross-checks over all of them. Disabled entries get every rule too: enabling
// one later must not be the moment a typo surfaces.
func checkUpstreams(ps *Problems, us []UpstreamURL) {
	enabled := 0
	seen := map[string]int{} // identity (see checkURL) → index
	for i, u := range us {
		path := fmt.Sprintf("upstreams[%d]", i)
		if id := checkUpstream(ps, path, u); id != "" {
			if j, dup := seen[id]; dup {
				ps.add(path+".url", CodeDuplicate, "the same upstream as upstreams[%d].url", j)
			} else {
				seen[id] = i
			}
		}
		if u.IsEnabled() {
			enabled++
		}
	}
	switch {
	case enabled == 0:
		ps.add("upstreams", CodeNoUpstreams, "no enabled upstream: declare at least one [[upstreams]] (the built-in upstreams serve only when no file is given)")
	case enabled > MaxUpstreams:
		ps.add("upstreams", CodeTooManyUpstreams, "%d enabled upstreams, at most %d", enabled, MaxUpstreams)
	}
}

// checkUpstream checks one entry and returns its URL's identity for the
// duplicate check, or "" when the URL is unusable.
func checkUpstream(ps *Problems, path string, u UpstreamURL) string {
	var id string
	if u.URL == "" {
		ps.add(path+".url", CodeRequired, "missing: every upstream needs a url")
	} else {
		var hostIsName bool
		id, hostIsName = checkURL(ps, path+".url", u.URL)
		if hostIsName && u.Address == "" {
			ps.add(path+".address", CodeAddressRequired,
				"the URL's host is a name and nxdns never resolves an upstream's name: give its IP address")
		}
	}
	if u.Address != "" {
		if msg := checkIP(u.Address); msg != "" {
			ps.add(path+".address", CodeInvalidAddress, "%q: %s", u.Address, msg)
		}
	}
	if u.TLSName != "" && !validTLSName(u.TLSName) {
		ps.add(path+".tls_name", CodeInvalidName, "%q is not a host name or IP address", u.TLSName)
	}
	return id
}

// checkURL applies the URL rules of docs/design.md#config-upstreams:
// tls://host[:port], quic://host[:port] (docs/upstream-pool.md "DNS over
// QUIC") or https://host[:port]/path, no userinfo, no fragment. It returns
// the URL's identity (scheme, lower-case host, effective port, path and query, so that
// tls://9.9.9.9 and tls://9.9.9.9:853 are one upstream) and whether the host
// is a name. Messages never quote the URL: its path or userinfo may hold a
// secret.
func checkURL(ps *Problems, path, raw string) (id string, hostIsName bool) {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL
		}
		ps.add(path, CodeInvalidURL, "not a URL: %v", err)
		return "", false
	}
	port := ""
	switch u.Scheme {
	case "tls":
		port = portDoT
	case "https":
		port = portDoH
	case "quic":
		port = portDoQ
	case "h3":
		port = portDoH // DoH over HTTP/3 (doh3.go)
	case "":
		ps.add(path, CodeUnsupportedScheme, "no scheme: want tls:// (DoT), https:// (DoH), quic:// (DoQ) or h3:// (DoH over HTTP/3)")
	default:
		ps.add(path, CodeUnsupportedScheme, "scheme %q: want tls:// (DoT), https:// (DoH), quic:// (DoQ) or h3:// (DoH over HTTP/3)%s", u.Scheme, schemeHint(u.Scheme))
	}
	if u.User != nil {
		ps.add(path, CodeUserinfo, "userinfo (user@ or user:password@) is not allowed")
	}
	fragment := strings.Contains(raw, "#") // even an empty one: "x#" parses with Fragment ""
	if fragment {
		ps.add(path, CodeFragment, "a #fragment is not allowed")
	}
	if port == "" || u.User != nil || fragment {
		return "", false
	}
	host := u.Hostname()
	if u.Opaque != "" || host == "" {
		ps.add(path, CodeInvalidURL, "no host: want %s", urlShape(u.Scheme))
		return "", false
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			ps.add(path, CodeInvalidURL, "port %q is not 1 to 65535", p)
			return "", false
		}
		port = p
	}
	switch {
	case dohScheme(u.Scheme) && u.Path == "":
		// Decision: no guessed default. The path is the provider's, and
		// /dns-query is common but not universal (RFC 8484 §3 leaves it to
		// the server's URI template).
		ps.add(path, CodePathRequired, "an %s URL needs its path, e.g. %s://%s/dns-query", u.Scheme, u.Scheme, u.Host)
		return "", false
	case !dohScheme(u.Scheme) && (u.Path != "" && u.Path != "/" || u.RawQuery != ""):
		ps.add(path, CodeInvalidURL, "a %s URL has no path or query: want %s", u.Scheme, urlShape(u.Scheme))
		return "", false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		if msg := checkIP(host); msg != "" {
			ps.add(path, CodeInvalidAddress, "host %s: %s", host, msg)
			return "", false
		}
	} else if !validHost(host) {
		ps.add(path, CodeInvalidName, "host %q is neither an IP address nor a host name", host)
		return "", false
	} else {
		hostIsName = true
	}
	id = u.Scheme + "://" + strings.ToLower(strings.TrimSuffix(host, ".")) + ":" + port
	if dohScheme(u.Scheme) {
		id += u.EscapedPath() + "?" + u.RawQuery
	}
	return id, hostIsName
}

func urlShape(scheme string) string {
	switch scheme {
	case "https", "h3":
		return scheme + "://host[:port]/path"
	case "quic":
		return "quic://host[:port]"
	}
	return "tls://host[:port]"
}

// checkIP returns why s is not an address to connect to, or "".
func checkIP(s string) string {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return "not an IP address"
	}
	return checkAddr(ip)
}

func checkAddr(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "the unspecified address"
	case ip.IsMulticast():
		return "a multicast address"
	}
	return ""
}

// validTLSName accepts a host name or an IP literal: Go verifies an IP
// server name against the certificate's IP addresses (as 1.1.1.1 has).
func validTLSName(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return validHost(s)
}
