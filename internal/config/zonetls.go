package config

import (
	"fmt"
	"strings"
)

// Encrypted forward-zone resolvers (docs/forward.md "Encrypted resolvers"):
// a zone may point at a resolver over DoT (tls://), DoH (https://) or DoQ
// (quic://), with the URL rules of an upstream (checkURL) except that the
// host must be an IP literal: a zone has no address key, and nxdns never
// resolves a resolver's name. tls_name and ca_file mean what they mean for
// an upstream.

// EncryptedResolver reports whether a zone's resolver URL names an
// encrypted scheme (tls, https, quic), case-insensitively as parseResolver
// reads udp and tcp. internal/forward routes on it too, so validation and
// the zone table agree on which rules a URL gets.
func EncryptedResolver(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return false
	}
	switch strings.ToLower(scheme) {
	case "tls", "https", "quic", "h3":
		return true
	}
	return false
}

// checkZoneTLS checks an encrypted zone's resolver, tls_name and ca_file
// path. Messages name the key and never quote the URL: a DoH path may hold
// an account token.
func checkZoneTLS(ps *Problems, path string, z ForwardZone) {
	if _, hostIsName := checkURL(ps, path+".resolver", z.Resolver); hostIsName {
		ps.add(path+".resolver", CodeInvalidResolver,
			"the host is a name: want an IP address (nxdns resolves no resolver's name; put the certificate's name in tls_name)")
	}
	if z.TLSName != "" && !validTLSName(z.TLSName) {
		ps.add(path+".tls_name", CodeInvalidName, "%q is not a host name or IP address", z.TLSName)
	}
}

// checkZonePlainTLSKeys reports tls_name or ca_file on a udp/tcp zone,
// where nothing would use them.
func checkZonePlainTLSKeys(ps *Problems, path string, z ForwardZone) {
	if EncryptedResolver(z.Resolver) {
		return
	}
	if z.TLSName != "" {
		ps.add(path+".tls_name", CodeInvalidName, "only for a tls://, https:// or quic:// resolver")
	}
	if z.CAFile != "" {
		ps.add(path+".ca_file", CodeCAFile, "only for a tls://, https:// or quic:// resolver")
	}
}

// readZoneCAs reads each forward zone's ca_file once, as ReadFiles does an
// upstream's, and keeps it in ForwardZone.CA.
func (c *Config) readZoneCAs(ps *Problems) {
	for i := range c.ForwardZones {
		z := &c.ForwardZones[i]
		if z.CAFile == "" {
			continue
		}
		z.CA = readCA(ps, fmt.Sprintf("forward_zones[%d].ca_file", i), z.CAFile)
	}
}
