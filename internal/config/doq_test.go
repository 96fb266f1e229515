package config

import "testing"

// quic:// upstreams (DNS over QUIC, docs/upstream-pool.md "DNS over QUIC
// (DoQ)") are accepted with their default port, take no path or query like
// tls://, and are a different upstream from tls:// at the same address.
func TestValidate_quicUpstreams(t *testing.T) {
	c := valid()
	c.Upstreams = append(c.Upstreams,
		UpstreamURL{URL: "quic://192.0.2.53"},
		UpstreamURL{URL: "quic://192.0.2.53:853"}, // duplicate of [1]: 853 is the default
		UpstreamURL{URL: "quic://192.0.2.54/dns-query"},
		UpstreamURL{URL: "tls://192.0.2.53"}, // same address over DoT: another upstream
		UpstreamURL{URL: "doq://192.0.2.55"},
	)
	assertProblems(t, Validate(c), Problems{
		{Path: "upstreams[2].url", Code: CodeDuplicate},
		{Path: "upstreams[3].url", Code: CodeInvalidURL},
		{Path: "upstreams[5].url", Code: CodeUnsupportedScheme},
	})
}
