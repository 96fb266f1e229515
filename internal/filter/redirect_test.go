package filter

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
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

// firstDownload waits for the download Update starts at once for a list
// with no copy yet, and returns the list's status after it. (A Refresh
// beside it would race it for NAME.list.new, and fail now and then for
// that alone.)
func firstDownload(t *testing.T, e *Engine) ListStatus {
	t.Helper()
	var st ListStatus
	testutil.WaitFor(t, "the first download", 10*time.Second, func() bool {
		st = e.Snapshot().Lists[0]
		return st.Rules > 0 || st.Error != ""
	})
	return st
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
			st := firstDownload(t, e)
			if tc.follow {
				if st.Error != "" || st.Rules != 10 {
					t.Fatalf("the redirect was not followed: %+v", st)
				}
				return
			}
			if st.Rules != 0 {
				t.Fatal("the redirect was followed")
			}
			if !strings.Contains(st.Error, "redirect refused") || !strings.Contains(st.Error, "loopback") {
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
	if st := firstDownload(t, e); st.Error != "" || st.Rules != 5 {
		t.Fatalf("not fetched from this machine: %+v", st)
	}
	if asked.Load() != 0 {
		t.Error("localhost was looked up")
	}
}

// TestRedirectGuard_refusesEveryInwardSpelling: after a redirect from a
// public list host, an address that leads inward is refused however it is
// spelt — IPv6 loopback, IPv4-mapped, the unspecified addresses and the
// rest of "this network" (0.0.0.0/8, which reaches the host itself), the
// cloud metadata address, a zone-scoped link-local one, and a private or
// loopback IPv4 address behind the NAT64 prefix 64:ff9b::/96 (RFC 6052),
// which a household's IPv6-only router translates into its own LAN — while
// public addresses, NAT64'd ones included, pass.
func TestRedirectGuard_refusesEveryInwardSpelling(t *testing.T) {
	for _, tc := range []struct {
		addr string
		pass bool
	}{
		{"::1", false}, {"::ffff:127.0.0.1", false}, {"0.0.0.0", false}, {"::", false},
		{"0.1.2.3", false}, {"169.254.169.254", false}, {"fe80::1%eth0", false},
		{"::ffff:192.168.1.1", false}, {"100.64.0.1", false}, {"fd00::1", false},
		{"64:ff9b::c0a8:101", false}, {"64:ff9b::7f00:1", false}, {"64:ff9b::a9fe:a9fe", false},
		{"192.0.2.1", true}, {"2001:db8::1", true}, {"64:ff9b::c000:201", true},
	} {
		g := &redirectGuard{origin: scopePublic, after: true}
		_, err := g.admit("inward.test", []netip.Addr{netip.MustParseAddr(tc.addr)})
		if refused := errors.Is(err, ErrRedirectRefused); refused == tc.pass {
			t.Errorf("%s: admitted %v, want %v (%v)", tc.addr, !refused, tc.pass, err)
		}
	}
}

// TestDownload_numericHostIsNeitherLookedUpNorDialled: a host whose last
// label is a number — 127.1, 2130706433, 0177.0.0.1, 0x7f.1 — is an IPv4
// address to a browser (and to inet_aton) but no address Go parses, and no
// name (RFC 3696 §2: a top-level label is not all-numeric). It is refused
// with the reason, in a list URL and in a redirect, and never asked of
// anyone: before, it went to the upstream pool as a name.
func TestDownload_numericHostIsNeitherLookedUpNorDialled(t *testing.T) {
	var asked atomic.Int64
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		asked.Add(1)
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	ls := newListServer(t, names("ad", 5))
	_, port, _ := net.SplitHostPort(ls.Listener.Addr().String())
	for _, host := range []string{"127.1", "2130706433", "0177.0.0.1", "0x7f.1", "lists.0x7F"} {
		e := New(Options{LookupHost: lookup})
		e.Update(urlCfg(t.TempDir(), "http://"+host+":"+port+"/list.txt"))
		err := e.Refresh(t.Context(), "remote")
		e.Close()
		if err == nil || !strings.Contains(err.Error(), "last label is a number") {
			t.Errorf("%s: %v, want the reason", host, err)
		}
	}
	redirect := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.1:"+port+"/list.txt", http.StatusFound)
	}))
	e := New(Options{LookupHost: lookup})
	defer e.Close()
	e.Update(urlCfg(t.TempDir(), redirect.URL+"/list.txt"))
	if err := e.Refresh(t.Context(), "remote"); err == nil || !strings.Contains(err.Error(), "last label is a number") {
		t.Errorf("a redirect to http://127.1: %v, want the reason", err)
	}
	if asked.Load() != 0 || ls.requests.Load() != 0 {
		t.Errorf("%d lookups, %d requests to the list server; want none", asked.Load(), ls.requests.Load())
	}
}
