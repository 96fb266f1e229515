package server

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/tlscert"
)

// testServerName is the name the test certificates carry.
const testServerName = "dns.home.test"

// testPKI is a test CA and serving certificate files, loaded into a real
// tlscert.Store the server reads at every handshake.
type testPKI struct {
	ca         *certs.CA
	cert, key  string
	store      *tlscert.Store
	clientConf *tls.Config // trusts the CA, verifies testServerName
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &testPKI{ca: ca, cert: filepath.Join(dir, "fullchain.pem"), key: filepath.Join(dir, "key.pem")}
	p.rotate(t)
	if p.store, err = tlscert.Open(p.cert, p.key, tlscert.Options{}); err != nil {
		t.Fatal(err)
	}
	p.clientConf = &tls.Config{RootCAs: ca.Pool(), ServerName: testServerName}
	return p
}

// rotate writes a fresh certificate over the files; the caller refreshes
// the store. It returns the new leaf.
func (p *testPKI) rotate(t *testing.T) *x509.Certificate {
	t.Helper()
	c, err := p.ca.Issue(testServerName)
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteLeafFiles(c, p.cert, p.key); err != nil {
		t.Fatal(err)
	}
	return c.Leaf
}

// startTLSServer serves st on 127.0.0.1 plain, DoT and DoH (kernel-chosen
// ports) with the PKI's certificate.
func startTLSServer(t *testing.T, st *State, p *testPKI, tweak ...func(*Server)) *Server {
	t.Helper()
	s := startServer(t, st, tweak...)
	if err := s.ListenTLS([]string{"127.0.0.1:0"}, []string{"127.0.0.1:0"}, p.store); err != nil {
		t.Fatal(err)
	}
	return s
}

func dotAddr(s *Server) string { d, _ := s.TLSAddrs(); return d[0].String() }
func dohURL(s *Server) string {
	_, d := s.TLSAddrs()
	return "https://" + d[0].String() + "/dns-query"
}

// dialDoT is a DoT client connection, handshake done.
func dialDoT(t *testing.T, addr string, conf *tls.Config) *dns.Conn {
	t.Helper()
	c, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatalf("DoT dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &dns.Conn{Conn: c}
}

// dohClient is an HTTP client for the PKI; h1 forces HTTP/1.1.
func dohClient(t *testing.T, conf *tls.Config, h1 bool) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: conf.Clone(), ForceAttemptHTTP2: !h1}
	if h1 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func tlsQuery(name string) *dns.Msg {
	m := newQuery(name, dns.TypeA)
	m.SetEdns0(1232, false)
	return m
}
