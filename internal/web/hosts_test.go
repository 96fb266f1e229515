package web

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/testutil"
)

// getWithHost fetches path from s over loopback with the given Host header.
func getWithHost(t *testing.T, s *Server, method, host, path string) (int, string) {
	t.Helper()
	return testutil.HTTPWithHost(t, method, "http://"+loopbackURLHost(t, s)+path, host)
}

// A loopback web.listen without a password serves its private and mutating
// routes to this host; a request whose Host is a foreign name (a DNS
// rebinding page) is refused with 421 on every route, while the listen
// address, localhost and the names of web.hostnames are served.
func TestHost_foreignNameRefusedOnEveryRoute(t *testing.T) {
	s := newTestServer(t, "127.0.0.1:0")
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") })
	s.Handle("GET /api/private", ok, Private)
	s.Handle("POST /api/act", ok, Mutating)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	port := strings.TrimPrefix(loopbackURLHost(t, s), "127.0.0.1")
	routes := [][2]string{{"GET", "/api/private"}, {"POST", "/api/act"}, {"GET", "/api/health"}, {"GET", "/metrics"}}
	for _, host := range []string{"rebind.example" + port, "rebind.example", "127.0.0.1.nip.example" + port, "nxdns.home.arpa" + port, "10.0.0.1" + port} {
		for _, r := range routes {
			code, body := getWithHost(t, s, r[0], host, r[1])
			if code != http.StatusMisdirectedRequest || !strings.Contains(body, "web.hostnames") {
				t.Errorf("%s %s with Host %q: %d %q, want 421 naming web.hostnames", r[0], r[1], host, code, body)
			}
		}
	}
	for _, host := range []string{"127.0.0.1" + port, "127.0.0.1", "localhost" + port, "LOCALHOST.", "[::ffff:127.0.0.1]" + port} {
		for _, r := range routes {
			if code, body := getWithHost(t, s, r[0], host, r[1]); code != http.StatusOK {
				t.Errorf("%s %s with Host %q: %d %q, want 200", r[0], r[1], host, code, body)
			}
		}
	}
	s.SetHostnames([]string{"nxdns.home.arpa."})
	if code, body := getWithHost(t, s, "GET", "Nxdns.Home.Arpa"+port, "/api/private"); code != http.StatusOK {
		t.Errorf("a web.hostnames name: %d %q, want 200", code, body)
	}
	if code, _ := getWithHost(t, s, "GET", "rebind.example"+port, "/api/private"); code != http.StatusMisdirectedRequest {
		t.Errorf("a foreign name after SetHostnames: %d, want 421", code)
	}
}

// On a wildcard web.listen the endpoint is reached by any of the host's
// addresses: every IP literal is served (a page cannot send one as Host
// under its own name), names still are checked.
func TestHost_wildcardListenServesAnyAddress(t *testing.T) {
	for in, want := range map[string]bool{
		"192.168.1.10:9153": true, "[fe80::1]:9153": true, "[2001:db8::1]": true, "localhost": true,
		"pi.lan:9153": false, "evil.example": false, "": true,
		// Empty only once the port or brackets are gone: not a name of
		// this endpoint either.
		":9153": false, "[]": false, "[]:9153": false, ".": false,
	} {
		if got := newHostPolicy([]string{"0.0.0.0:9153"}, nil).allows(in); got != want {
			t.Errorf("wildcard listen, Host %q: allowed %v, want %v", in, got, want)
		}
	}
	if newHostPolicy([]string{"192.168.1.2:9153"}, nil).allows("192.168.1.3:9153") {
		t.Error("a listen on 192.168.1.2 allows Host 192.168.1.3")
	}
}
