package config

import (
	"strings"
	"testing"
)

// tls.doh3_listen: UDP addresses beside DoH's TCP ones on the same port,
// none twice, none a dns.listen or tls.doq_listen address, and the
// certificate required.
func TestValidate_doh3Listen(t *testing.T) {
	c := valid()
	c.DNS.Listen = []string{"127.0.0.1:53"}
	c.TLS = TLS{CertFile: "/c", KeyFile: "/k",
		DoHListen:  []string{"0.0.0.0:443"},
		DoQListen:  []string{"0.0.0.0:853"},
		DoH3Listen: []string{"0.0.0.0:443", "[::]:443", "0.0.0.0:443", "127.0.0.1:53", "127.0.0.1:853", "dns.home:443"}}
	assertProblems(t, Validate(c), Problems{
		{Path: "tls.doh3_listen[2]", Code: CodeDuplicate},
		{Path: "tls.doh3_listen[3]", Code: CodeDuplicate},
		{Path: "tls.doh3_listen[4]", Code: CodeListenConflict},
		{Path: "tls.doh3_listen[5]", Code: CodeInvalidListen},
	})

	c = valid()
	c.TLS = TLS{DoH3Listen: []string{"0.0.0.0:443"}}
	assertProblems(t, Validate(c), Problems{
		{Path: "tls.cert_file", Code: CodeRequired},
		{Path: "tls.key_file", Code: CodeRequired},
	})
}

// h3:// upstreams follow https://'s rules (a path is required) and a
// mistyped HTTP/3 scheme gets a did-you-mean.
func TestValidate_h3Upstreams(t *testing.T) {
	c := valid()
	c.Upstreams = []UpstreamURL{
		{URL: "h3://192.0.2.1/dns-query"},
		{URL: "h3://192.0.2.2:8443"},
		{URL: "doh3://192.0.2.3/dns-query"},
	}
	ps := Validate(c)
	assertProblems(t, ps, Problems{
		{Path: "upstreams[1].url", Code: CodePathRequired},
		{Path: "upstreams[2].url", Code: CodeUnsupportedScheme},
	})
	for _, p := range ps {
		if p.Path == "upstreams[2].url" && !strings.Contains(p.Message, `did you mean "h3"`) {
			t.Errorf("message %q, want a did-you-mean for h3", p.Message)
		}
	}
}

// A forward zone may point at an h3:// resolver by IP, as at https://.
func TestValidate_h3ForwardZone(t *testing.T) {
	if !EncryptedResolver("h3://192.0.2.1/dns-query") {
		t.Errorf("h3:// is not an encrypted resolver")
	}
}
