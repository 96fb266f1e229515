package upstream

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		name, url, address, tlsName string
		scheme                      Scheme
		addr                        string
		wantTLS                     string
	}{
		{name: "dot name with address defaults to 853", url: "tls://dns.quad9.net", address: "9.9.9.9",
			scheme: SchemeDoT, addr: "9.9.9.9:853", wantTLS: "dns.quad9.net"},
		{name: "doh name with address defaults to 443", url: "https://dns.example/dns-query", address: "192.0.2.7",
			scheme: SchemeDoH, addr: "192.0.2.7:443", wantTLS: "dns.example"},
		{name: "ip literal needs no address", url: "tls://1.1.1.1",
			scheme: SchemeDoT, addr: "1.1.1.1:853", wantTLS: "1.1.1.1"},
		{name: "explicit port", url: "tls://192.0.2.1:8853",
			scheme: SchemeDoT, addr: "192.0.2.1:8853", wantTLS: "192.0.2.1"},
		{name: "ipv6 literal with port", url: "tls://[2001:db8::1]:8853",
			scheme: SchemeDoT, addr: "[2001:db8::1]:8853", wantTLS: "2001:db8::1"},
		{name: "ipv6 literal default port", url: "https://[2001:db8::2]/q",
			scheme: SchemeDoH, addr: "[2001:db8::2]:443", wantTLS: "2001:db8::2"},
		{name: "ipv6 address for a name", url: "tls://dns.example", address: "::1",
			scheme: SchemeDoT, addr: "[::1]:853", wantTLS: "dns.example"},
		{name: "address overrides an ip host", url: "tls://192.0.2.1", address: "192.0.2.9",
			scheme: SchemeDoT, addr: "192.0.2.9:853", wantTLS: "192.0.2.1"},
		{name: "v4-mapped address is unmapped", url: "tls://dns.example", address: "::ffff:192.0.2.3",
			scheme: SchemeDoT, addr: "192.0.2.3:853", wantTLS: "dns.example"},
		{name: "tls name override", url: "tls://192.0.2.1", tlsName: "dns.example",
			scheme: SchemeDoT, addr: "192.0.2.1:853", wantTLS: "dns.example"},
		{name: "doq defaults to 853", url: "quic://192.0.2.5",
			scheme: SchemeDoQ, addr: "192.0.2.5:853", wantTLS: "192.0.2.5"},
		{name: "doq name with address and port", url: "quic://dns.example:8853", address: "192.0.2.6",
			scheme: SchemeDoQ, addr: "192.0.2.6:8853", wantTLS: "dns.example"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep, err := ParseEndpoint(tt.url, tt.address, tt.tlsName)
			if err != nil {
				t.Fatalf("ParseEndpoint: %v", err)
			}
			if ep.Scheme != tt.scheme {
				t.Errorf("scheme = %q, want %q", ep.Scheme, tt.scheme)
			}
			if want := netip.MustParseAddrPort(tt.addr); ep.Addr != want {
				t.Errorf("addr = %v, want %v", ep.Addr, want)
			}
			if ep.TLSName != tt.wantTLS {
				t.Errorf("tls name = %q, want %q", ep.TLSName, tt.wantTLS)
			}
			if ep.URL == nil || ep.URL.String() != tt.url {
				t.Errorf("URL = %v, want the configured %q kept whole", ep.URL, tt.url)
			}
		})
	}
}

func TestParseEndpoint_rejects(t *testing.T) {
	tests := []struct{ name, url, address, want string }{
		{"name without address", "tls://dns.example", "", "address is required"},
		{"plain dns scheme", "udp://192.0.2.1:53", "", "unsupported scheme"},
		{"no scheme", "192.0.2.1", "", "unsupported scheme"},
		{"userinfo", "https://user:pw@192.0.2.1/q", "", "userinfo"},
		{"fragment", "https://192.0.2.1/q#frag", "", "fragment"},
		{"port zero", "tls://192.0.2.1:0", "", "invalid port"},
		{"port too large", "tls://192.0.2.1:70000", "", "invalid port"},
		{"missing host", "tls://:853", "", "missing host"},
		{"address not an ip", "tls://dns.example", "dns.example", "not an IP"},
		{"unparsable", "tls://[::1", "", "invalid URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseEndpoint(tt.url, tt.address, "")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestRedact: logs and metrics show scheme, host and port only. Path and query
// may carry an account token, userinfo a password.
func TestRedact(t *testing.T) {
	tests := []struct{ raw, want string }{
		{"https://dns.example/dns-query/SECRETTOKEN?key=SECRETKEY", "https://dns.example"},
		{"https://user:SECRETPW@dns.example:8443/SECRETPATH", "https://dns.example:8443"},
		{"tls://192.0.2.1", "tls://192.0.2.1"},
		{"tls://192.0.2.1:853", "tls://192.0.2.1:853"},
		{"https://[2001:db8::1]/SECRETPATH", "https://[2001:db8::1]"},
		{"https://[2001:db8::1]:443/SECRETPATH?SECRETQ", "https://[2001:db8::1]:443"},
		{"https://dns.example/x#SECRETFRAG", "https://dns.example"},
		{"https://dns.example/%zzSECRET", "invalid-url"},
	}
	for _, tt := range tests {
		got := RedactString(tt.raw)
		if got != tt.want {
			t.Errorf("RedactString(%q) = %q, want %q", tt.raw, got, tt.want)
		}
		if strings.Contains(got, "SECRET") {
			t.Errorf("RedactString(%q) = %q leaks a secret", tt.raw, got)
		}
	}
	ep, err := ParseEndpoint("https://dns.example/SECRETTOKEN?k=SECRET", "192.0.2.1", "")
	if err != nil {
		t.Fatal(err)
	}
	if got := ep.Redacted(); got != "https://dns.example" {
		t.Errorf("Redacted = %q", got)
	}
	if Redact(nil) != "" {
		t.Error("Redact(nil) is not empty")
	}
}

// TestEndpointScrub: the one redaction of free text. The whole URL becomes
// its redacted form; its secret parts alone, escaped or not, become
// "[redacted]"; text without them is left as it was.
func TestEndpointScrub(t *testing.T) {
	ep, err := ParseEndpoint("https://dns.example:8443/dns-query/SECRET%20TOKEN?key=SECRETKEY", "192.0.2.1", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`Post "https://dns.example:8443/dns-query/SECRET%20TOKEN?key=SECRETKEY": EOF`, `Post "https://dns.example:8443": EOF`},
		{"POST /dns-query/SECRET%20TOKEN?key=SECRETKEY HTTP/2", "POST /[redacted] HTTP/2"},
		{"path /dns-query/SECRET%20TOKEN", "path /[redacted]"},
		{"path /dns-query/SECRET TOKEN", "path /[redacted]"},
		{"query key=SECRETKEY", "query [redacted]"},
		{"dial tcp 192.0.2.1:8443: connection refused", "dial tcp 192.0.2.1:8443: connection refused"},
	} {
		got := ep.Scrub(tc.in)
		if got != tc.want {
			t.Errorf("Scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if strings.Contains(got, "SECRET") {
			t.Errorf("Scrub(%q) = %q leaks a secret", tc.in, got)
		}
	}
	raw, err := url.Parse("https://user:SECRETPW@dns.example/x#SECRETFRAG")
	if err != nil {
		t.Fatal(err)
	}
	bare := Endpoint{URL: raw}
	if got := bare.Scrub("as user:SECRETPW, then SECRETPW alone, then #SECRETFRAG"); strings.Contains(got, "SECRET") {
		t.Errorf("Scrub leaks userinfo or fragment: %q", got)
	}
	if got := (Endpoint{}).Scrub("no URL"); got != "no URL" {
		t.Errorf("Scrub without a URL = %q", got)
	}
}
