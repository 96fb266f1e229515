package config

import "testing"

// tls.doq_listen: UDP addresses beside DoT's TCP ones on the same port,
// none twice, none a dns.listen address, and the certificate required.
func TestValidate_doqListen(t *testing.T) {
	c := valid()
	c.DNS.Listen = []string{"127.0.0.1:53"}
	c.TLS = TLS{CertFile: "/c", KeyFile: "/k",
		DoTListen: []string{"0.0.0.0:853"},
		DoQListen: []string{"0.0.0.0:853", "[::]:853", "0.0.0.0:853", "127.0.0.1:53", "dns.home:853"}}
	assertProblems(t, Validate(c), Problems{
		{Path: "tls.doq_listen[2]", Code: CodeDuplicate},
		{Path: "tls.doq_listen[3]", Code: CodeDuplicate},
		{Path: "tls.doq_listen[4]", Code: CodeInvalidListen},
	})

	c = valid()
	c.TLS = TLS{DoQListen: []string{"0.0.0.0:853"}}
	assertProblems(t, Validate(c), Problems{
		{Path: "tls.cert_file", Code: CodeRequired},
		{Path: "tls.key_file", Code: CodeRequired},
	})
}
