package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
)

// TLS is the [tls] section (docs/design.md#tls-serving): DNS over TLS and DNS over HTTPS
// served to the LAN with one certificate. Both lists empty (the default)
// serve neither.
type TLS struct {
	CertFile   string   `toml:"cert_file"`   // PEM: the leaf first, then the intermediates (an ACME fullchain.pem)
	KeyFile    string   `toml:"key_file"`    // PEM: the leaf's private key
	DoTListen  []string `toml:"dot_listen"`  // IP:port each, usually 0.0.0.0:853 (RFC 7858)
	DoHListen  []string `toml:"doh_listen"`  // IP:port each, usually 0.0.0.0:443, path /dns-query (RFC 8484)
	DoQListen  []string `toml:"doq_listen"`  // IP:port each, UDP, usually 0.0.0.0:853 (RFC 9250; doqlisten.go)
	DoH3Listen []string `toml:"doh3_listen"` // IP:port each, UDP, usually 0.0.0.0:443: DoH over HTTP/3 (doh3.go)
}

// Serving reports whether any DoT, DoH or DoQ listener is configured.
func (t TLS) Serving() bool {
	return len(t.DoTListen) > 0 || len(t.DoHListen) > 0 || len(t.DoQListen) > 0 || len(t.DoH3Listen) > 0
}

// checkTLS applies [tls]'s rules: files absolute and both given when a
// listener is; listen addresses valid, unique across both lists, and not a
// TCP port dns.listen already binds (dnsListen). The files themselves are
// read when serving starts and by `nxdns check --tls`, not here: an ACME
// client may create them after the configuration is written, and a reload
// must not fail because a renewal is half-way.
func checkTLS(ps *Problems, t TLS, dnsListen []string) {
	for _, f := range []struct{ path, value string }{{"tls.cert_file", t.CertFile}, {"tls.key_file", t.KeyFile}} {
		switch {
		case f.value == "" && t.Serving():
			ps.add(f.path, CodeRequired, "missing: tls.dot_listen, tls.doh_listen, tls.doq_listen or tls.doh3_listen is set, and serving TLS needs a certificate and its key")
		case f.value != "" && !filepath.IsAbs(f.value):
			ps.add(f.path, CodeTLSFile, "%q is not an absolute path (under systemd the working directory is /)", f.value)
		}
	}
	var taken []bound
	for i, s := range dnsListen { // already reported by checkListen when invalid
		if ap, msg := parseListen(s, "53"); msg == "" {
			taken = append(taken, bound{ap, fmt.Sprintf("dns.listen[%d]", i)})
		}
	}
	taken = checkTLSListen(ps, "tls.dot_listen", "853", t.DoTListen, taken)
	checkTLSListen(ps, "tls.doh_listen", "443", t.DoHListen, taken)
	checkDoQListen(ps, t.DoQListen, dnsListen)
	checkDoH3Listen(ps, t, dnsListen)
}

// bound is a TCP address some listener of the file binds, and which key.
type bound struct {
	ap   netip.AddrPort
	path string
}

func checkTLSListen(ps *Problems, key, port string, addrs []string, taken []bound) []bound {
	for i, s := range addrs {
		path := fmt.Sprintf("%s[%d]", key, i)
		ap, msg := parseListen(s, port)
		if msg != "" {
			ps.add(path, CodeInvalidListen, "%q: %s", s, msg)
			continue
		}
		if other, ok := clash(ap, taken); ok {
			if other.ap == ap {
				ps.add(path, CodeDuplicate, "%s is already %s", ap, other.path)
			} else {
				ps.add(path, CodeListenConflict, "%s and %s (%s) cannot both be bound: one is the wildcard address of the other's family on the same port", ap, other.ap, other.path)
			}
			continue
		}
		taken = append(taken, bound{ap, path})
	}
	return taken
}

// clash finds an address that binding ap would collide with: the same
// address and port, or the same port where either is the unspecified
// address of the same family (Linux refuses 0.0.0.0:853 beside
// 192.168.1.2:853 without SO_REUSEADDR tricks nxdns does not play).
func clash(ap netip.AddrPort, taken []bound) (bound, bool) {
	a := ap.Addr().Unmap()
	for _, b := range taken {
		o := b.ap.Addr().Unmap()
		if b.ap.Port() != ap.Port() || a.Is4() != o.Is4() {
			continue
		}
		if a == o || a.IsUnspecified() || o.IsUnspecified() {
			return b, true
		}
	}
	return bound{}, false
}
