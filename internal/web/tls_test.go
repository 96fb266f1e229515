package web

import (
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

// With SetTLS the endpoint serves the same routes over HTTPS with the
// certificate given (web.tls_listen with the [tls] pair), a client that
// checks it against the CA gets in, and the plain listener still serves.
func TestServer_servesHTTPSWithTheCertificate(t *testing.T) {
	s, ca := tlsServer(t, "127.0.0.1:0")
	s.SetHostnames([]string{"nxdns.home.arpa"})
	s.Handle("GET /api/private", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strconv.FormatBool(r.TLS != nil))
	}), Private)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "nxdns.home.arpa"}}}
	req, _ := http.NewRequest("GET", "https://"+s.TLSAddr().String()+"/api/private", nil)
	req.Host = "nxdns.home.arpa"
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS with the CA: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "true" {
		t.Errorf("HTTPS: %d %q, want 200 served over TLS", resp.StatusCode, b)
	}
	if code, body := getWithHost(t, s, "GET", "127.0.0.1", "/api/private"); code != http.StatusOK || body != "false" {
		t.Errorf("plain: %d %q, want 200 over plain HTTP", code, body)
	}
}

// A browser offers HTTP/2 in the TLS handshake: the HTTPS listener answers
// it in HTTP/1.1, which the connection caps count (one request per
// connection at a time), and the Host check refuses a foreign name there as
// on the plain listener. Before, the handshake picked h2 with no HTTP/2
// server behind it, and every such connection was closed unanswered.
func TestServer_browserOverHTTPSGetsHTTP1(t *testing.T) {
	s, ca := tlsServer(t, "127.0.0.1:0")
	s.Handle("GET /api/private", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, r.Proto) }), Private)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "nxdns.home.arpa"}}
	t.Cleanup(tr.CloseIdleConnections)
	for host, want := range map[string]int{"localhost": http.StatusOK, "rebind.example": http.StatusMisdirectedRequest} {
		req, _ := http.NewRequest("GET", "https://"+s.TLSAddr().String()+"/api/private", nil)
		req.Host = host
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("Host %s, h2 offered: %v", host, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 1 || resp.StatusCode != want || (want == http.StatusOK && string(b) != "HTTP/1.1") {
			t.Errorf("Host %s, h2 offered: %s %d %q, want HTTP/1.1 %d", host, resp.Proto, resp.StatusCode, b, want)
		}
	}
}

// An HTTPS listener on the LAN makes the endpoint reachable from the LAN:
// without a password the private routes are refused there and on the
// loopback listener alike.
func TestServer_lanHTTPSListenerNeedsThePassword(t *testing.T) {
	s, _ := tlsServer(t, "0.0.0.0:0")
	s.Handle("GET /api/private", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") }), Private)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if code, body := getWithHost(t, s, "GET", "127.0.0.1", "/api/private"); code != http.StatusForbidden {
		t.Errorf("plain loopback with a LAN HTTPS listener and no password: %d %q, want 403", code, body)
	}
}

// tlsServer is a server on loopback that also serves HTTPS on tlsAddr with
// a certificate for nxdns.home.arpa from a fresh CA.
func tlsServer(t *testing.T, tlsAddr string) (*Server, *certs.CA) {
	t.Helper()
	ca := testutil.NewCA(t)
	leaf, err := ca.Issue("nxdns.home.arpa")
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, "127.0.0.1:0")
	s.SetTLS(tlsAddr, func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &leaf, nil })
	return s, ca
}
