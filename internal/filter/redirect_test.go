package filter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
)

// serveOn serves h on addr (a loopback address, port 0).
func serveOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("%s: %v", addr, err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = ln
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestDownload_redirectLeavesTheListHostsScopeIsRefused: a list on a
// public host that redirects to a loopback address is refused, with the
// reason in the list's status, and the inner server is never asked; a
// redirect to another public host, and one from a loopback list host to
// loopback, are followed. Only loopback is reachable from a test, so
// 127.0.0.2 and 127.0.0.3 stand for public hosts here (scopeOf).
func TestDownload_redirectLeavesTheListHostsScopeIsRefused(t *testing.T) {
	orig := scopeOf
	scopeOf = func(ip netip.Addr) scope {
		if ip == netip.MustParseAddr("127.0.0.2") || ip == netip.MustParseAddr("127.0.0.3") {
			return scopePublic
		}
		return orig(ip)
	}
	t.Cleanup(func() { scopeOf = orig })

	var inner atomic.Int64
	secret := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		inner.Add(1)
		fmt.Fprint(w, names("inner", 10))
	}))
	mirror := serveOn(t, "127.0.0.3:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, names("mirror", 10))
	}))
	redirect := func(to string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) })
	}
	// A name the list host's redirect gives, resolving inward: caught too.
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	_, secretPort, _ := net.SplitHostPort(secret.Listener.Addr().String())
	for _, tc := range []struct {
		what, to string
		origin   string
		follow   bool
	}{
		{"public to a loopback literal", secret.URL + "/list.txt", "127.0.0.2:0", false},
		{"public to a name resolving to loopback", "http://router.test:" + secretPort + "/list.txt", "127.0.0.2:0", false},
		{"public to public", mirror.URL + "/list.txt", "127.0.0.2:0", true},
		{"loopback to loopback", secret.URL + "/list.txt", "127.0.0.1:0", true},
	} {
		t.Run(tc.what, func(t *testing.T) {
			before := inner.Load()
			list := serveOn(t, tc.origin, redirect(tc.to))
			e := New(Options{LookupHost: lookup})
			defer e.Close()
			e.Update(urlCfg(t.TempDir(), list.URL+"/list.txt"))
			err := e.Refresh(t.Context(), "remote")
			if tc.follow {
				if err != nil {
					t.Fatalf("the redirect was not followed: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("the redirect was followed")
			}
			if st := e.Snapshot().Lists[0]; !strings.Contains(st.Error, "redirect refused") || !strings.Contains(st.Error, "loopback") {
				t.Errorf("list status error %q does not say why", st.Error)
			}
			if inner.Load() != before {
				t.Error("the inner server was asked")
			}
		})
	}
}

// TestDownload_localhostIsNeverLookedUp: a list on http://localhost:PORT
// is fetched from this machine; the name is never handed to LookupHost
// (whose upstreams could answer it with any address, RFC 6761 §6.3).
func TestDownload_localhostIsNeverLookedUp(t *testing.T) {
	ls := newListServer(t, names("ad", 5))
	_, port, _ := net.SplitHostPort(ls.Listener.Addr().String())
	var asked atomic.Int64
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		asked.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.9")}, nil // loopback, where no list server is
	}
	e := New(Options{LookupHost: lookup})
	defer e.Close()
	e.Update(urlCfg(t.TempDir(), "http://localhost:"+port+"/list.txt"))
	if err := e.Refresh(t.Context(), "remote"); err != nil {
		t.Fatal(err)
	}
	if asked.Load() != 0 {
		t.Error("localhost was looked up")
	}
}
