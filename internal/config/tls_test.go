package config

import "testing"

// TestValidate_tlsServing: a usual DoT and DoH setup on both families is
// valid, and the families' wildcards on one port do not conflict.
func TestValidate_tlsServing(t *testing.T) {
	c := Default()
	c.DNS.Listen = []string{"0.0.0.0:53", "[::]:53"}
	c.TLS = TLS{
		CertFile:  "/var/lib/acme/dns.home.example.org/fullchain.pem",
		KeyFile:   "/var/lib/acme/dns.home.example.org/key.pem",
		DoTListen: []string{"0.0.0.0:853", "[::]:853"},
		DoHListen: []string{"0.0.0.0:443", "[::]:443"},
	}
	if ps := Validate(c); len(ps) > 0 {
		t.Fatalf("problems:\n%v", ps)
	}
	if !c.TLS.Serving() || (TLS{CertFile: "/a", KeyFile: "/b"}).Serving() {
		t.Error("Serving() does not follow the listen lists")
	}
}

// TestValidate_tlsWildcardOverlapsDNSListen: a DoT wildcard on a port
// dns.listen binds on one address of the same family is a conflict; the
// other family is not.
func TestValidate_tlsWildcardOverlapsDNSListen(t *testing.T) {
	c := Default()
	c.DNS.Listen = []string{"192.168.1.2:853", "[::1]:5353"}
	c.TLS = TLS{CertFile: "/c", KeyFile: "/k", DoTListen: []string{"[::]:853", "0.0.0.0:853"}}
	ps := Validate(c)
	if !ps.Has("tls.dot_listen[1]", CodeListenConflict) || len(ps) != 1 {
		t.Fatalf("problems:\n%v\nwant exactly tls.dot_listen[1] ListenConflict", ps)
	}
}
