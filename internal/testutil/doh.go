package testutil

import (
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
)

// DoHServer is a loopback DNS-over-HTTPS server (RFC 8484) speaking HTTP/2
// (and HTTP/1.1 to a client that offers only that). It answers on every
// path, so a test may put a token in the URL's path.
type DoHServer struct {
	upstream
	Addr netip.AddrPort // 127.0.0.1:port
	Name string         // the name on its certificate
}

// StartDoH starts a DoH server on 127.0.0.1 whose certificate, issued by ca,
// carries name; h answers the queries. t.Cleanup stops it.
func StartDoH(t testing.TB, ca *certs.CA, name string, h Handler) *DoHServer {
	t.Helper()
	u, addr := startUpstream(t, ca, name, "doh://127.0.0.1:0", h, true)
	return &DoHServer{upstream: u, Addr: addr, Name: name}
}

// URL is the server's URL with the given path ("/dns-query"), named by the
// certificate's name: a client must dial Addr, never resolve the name.
func (s *DoHServer) URL(path string) string {
	return "https://" + net.JoinHostPort(s.Name, strconv.Itoa(int(s.Addr.Port()))) + path
}

// Connections is the number of TCP connections accepted.
func (s *DoHServer) Connections() int { return int(s.counts().Connections) }

// Requests is the number of requests received, HTTP2Requests those over
// HTTP/2 (r.ProtoMajor == 2).
func (s *DoHServer) Requests() int      { return int(s.counts().Requests) }
func (s *DoHServer) HTTP2Requests() int { return int(s.counts().H2Requests) }

// CloseClientConnections closes every connection, busy or idle.
func (s *DoHServer) CloseClientConnections() { s.srv.CloseConnections() }

// DoHGet asks m of a DoH server with GET (RFC 8484 §4.1) and returns the
// answer; any failure — transport, a status other than 200, an answer that
// does not parse — is an error. Safe to call from goroutines.
func DoHGet(c *http.Client, url string, m *dns.Msg) (*dns.Msg, error) {
	wire, err := m.Pack()
	if err != nil {
		return nil, err
	}
	resp, err := c.Get(url + "?dns=" + base64.RawURLEncoding.EncodeToString(wire))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 65536))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("DoH GET: HTTP %d", resp.StatusCode)
	}
	out := new(dns.Msg)
	if err := out.Unpack(body); err != nil {
		return nil, err
	}
	return out, nil
}
