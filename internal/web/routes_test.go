package web

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestPrivateRoutesOnlyOnLoopbackListen(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:9153", true}, {"[::1]:9153", true}, {"localhost:9153", true},
		{"0.0.0.0:9153", false}, {"[::]:9153", false}, {"192.168.1.2:9153", false}, {"bad", false},
	} {
		if got := isLoopbackListen(c.addr); got != c.want {
			t.Errorf("isLoopbackListen(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// A Private route on a loopback listen answers; the same route on a server
// whose configured address is the wildcard answers 403, whoever asks.
func TestHandleGuardsPrivateRoutes(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "secret") })
	for _, c := range []struct {
		addr   string
		access Access
		want   int
	}{
		{"127.0.0.1:0", Private, http.StatusOK},
		{"127.0.0.1:0", Mutating, http.StatusOK},
		{"0.0.0.0:0", Public, http.StatusOK},
		{"0.0.0.0:0", Private, http.StatusForbidden},
		{"0.0.0.0:0", Mutating, http.StatusForbidden},
	} {
		s := newTestServer(t, c.addr)
		s.Handle("GET /api/test", ok, c.access)
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := hc.Get("http://" + loopbackURLHost(t, s) + "/api/test")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s access %d: status %d, want %d", c.addr, c.access, resp.StatusCode, c.want)
		}
	}
}

// newTestServer is a Server on addr with an empty registry, shut down at
// cleanup.
func newTestServer(t *testing.T, addr string) *Server {
	t.Helper()
	s := New(addr, prometheus.NewRegistry(), func() Health { return Health{} }, nil)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

// loopbackURLHost is where a test reaches s: its port on 127.0.0.1, also
// when s listens on the wildcard.
func loopbackURLHost(t *testing.T, s *Server) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Addr().(*net.TCPAddr).Port))
}
