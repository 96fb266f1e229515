package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/certs"
)

// Forward zones over DoT, DoH and DoQ (docs/forward.md "Encrypted
// resolvers"): the upstream URL rules, an IP host, tls_name and ca_file
// only where a certificate is checked.
func TestValidate_encryptedForwardZones(t *testing.T) {
	c := valid()
	c.ForwardZones = []ForwardZone{
		{Zone: "a.corp", Resolver: "tls://10.0.0.53"},
		{Zone: "b.corp", Resolver: "https://10.0.0.53/dns-query", TLSName: "dns.corp.example"},
		{Zone: "c.corp", Resolver: "QUIC://10.0.0.53:8853", TLSName: "10.0.0.53"},
		{Zone: "d.corp", Resolver: "tls://dns.corp.example"},   // a name: nothing resolves it
		{Zone: "e.corp", Resolver: "https://10.0.0.53"},        // no path
		{Zone: "f.corp", Resolver: "quic://10.0.0.53:99999"},   // bad port
		{Zone: "g.corp", Resolver: "tls://u:secret@10.0.0.53"}, // userinfo
		{Zone: "h.corp", Resolver: "tls://10.0.0.53", TLSName: "not a name"},
		{Zone: "i.corp", Resolver: "udp://10.0.0.53:53", TLSName: "dns.corp.example", CAFile: "/etc/ca.pem"},
		{Zone: "j.corp", Resolver: "doq://10.0.0.53"},
	}
	ps := Validate(c)
	assertProblems(t, ps, Problems{
		{Path: "forward_zones[3].resolver", Code: CodeInvalidResolver},
		{Path: "forward_zones[4].resolver", Code: CodePathRequired},
		{Path: "forward_zones[5].resolver", Code: CodeInvalidURL},
		{Path: "forward_zones[6].resolver", Code: CodeUserinfo},
		{Path: "forward_zones[7].tls_name", Code: CodeInvalidName},
		{Path: "forward_zones[8].tls_name", Code: CodeInvalidName},
		{Path: "forward_zones[8].ca_file", Code: CodeCAFile},
		{Path: "forward_zones[9].resolver", Code: CodeUnsupportedScheme},
	})
	for _, p := range ps {
		if strings.Contains(p.Message, "secret") {
			t.Errorf("%s: message %q shows the URL's password", p.Path, p.Message)
		}
	}
}

// A zone's ca_file is read once by ReadFiles, like an upstream's, and a bad
// one is a problem naming the zone's key.
func TestReadFiles_forwardZoneCAFile(t *testing.T) {
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(good, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	c := valid()
	c.ForwardZones = []ForwardZone{
		{Zone: "a.corp", Resolver: "tls://10.0.0.53", CAFile: good},
		{Zone: "b.corp", Resolver: "tls://10.0.0.54", CAFile: filepath.Join(t.TempDir(), "missing.pem")},
	}
	ps := c.ReadFiles()
	assertProblems(t, ps, Problems{{Path: "forward_zones[1].ca_file", Code: CodeCAFile}})
	if string(c.ForwardZones[0].CA) != string(ca.PEM) {
		t.Error("forward_zones[0].ca_file was not kept in CA")
	}
}
