package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/testutil"
)

// dialFrom opens a TCP connection to s from the loopback source address src
// (127.0.0.x: distinct hosts on one machine).
func dialFrom(t *testing.T, s *Server, src string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// keepAlive makes one request on c and leaves the connection open and idle.
func keepAlive(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "GET /api/health HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("keep-alive request: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	c.SetDeadline(time.Time{})
}

// getFrom fetches path from the source address src, within 3 s.
func getFrom(s *Server, src, path string) (int, error) {
	c := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext,
	}}
	resp, err := c.Get("http://" + s.Addr().String() + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Idle keep-alive connections, from one host or from several filling the
// cap, never keep /metrics and /api/health from another client (docs/design.md#robustness,
// issue 13 finding 7: under netutil.LimitListener 32 idle connections
// blocked everyone until their idle timeout).
func TestServer_idleKeepAlivesMakeRoom(t *testing.T) {
	s := startWeb(t, nil, okHealth)
	for h := range maxConns / maxConnsPerClient {
		for range maxConnsPerClient {
			keepAlive(t, dialFrom(t, s, fmt.Sprintf("127.0.0.%d", 10+h)))
		}
	}
	for range maxConnsPerClient { // one host asking for more than its share
		keepAlive(t, dialFrom(t, s, "127.0.0.10"))
	}
	for _, path := range []string{"/metrics", "/api/health"} {
		if code, err := getFrom(s, "127.0.0.2", path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s with the connection cap held by idle keep-alives: %d, %v", path, code, err)
		}
		if code, err := getFrom(s, "127.0.0.10", path); err != nil || code != http.StatusOK {
			t.Errorf("GET %s from the host holding idle connections: %d, %v", path, code, err)
		}
	}
}

// A host holding busy connections (headers trickling, inside the header
// timeout) holds only its share: another host is still answered.
func TestServer_slowHostHoldsOnlyItsShare(t *testing.T) {
	s := startWeb(t, nil, okHealth)
	for range maxConns + 8 {
		c := dialFrom(t, s, "127.0.0.20")
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n") // never finished
	}
	if code, err := getFrom(s, "127.0.0.21", "/api/health"); err != nil || code != http.StatusOK {
		t.Errorf("GET /api/health while one host holds %d half-sent requests: %d, %v", maxConns+8, code, err)
	}
}

// zonedConn is an accepted connection from a link-local peer: loopback has
// no link-local address, so the peer is made up; only RemoteAddr and Close
// are used by the guard.
type zonedConn struct {
	net.Conn
	peer   *net.TCPAddr
	closed bool
}

func (c *zonedConn) RemoteAddr() net.Addr { return c.peer }
func (c *zonedConn) Close() error         { c.closed = true; return nil }

func fromZone(ip, zone string) *zonedConn {
	return &zonedConn{peer: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000, Zone: zone}}
}

// The zones of one link-local host are one client for the per-client cap,
// as they are for the DNS path (query.ClientOf): reaching the web endpoint
// over a second interface does not give a host a second share.
func TestConnGuard_zonesOfOneHostShareItsCap(t *testing.T) {
	g := newConnGuard(nil)
	for i := range maxConnsPerClient {
		if g.admit(fromZone("fe80::1", "eth0")) == nil {
			t.Fatalf("connection %d from fe80::1%%eth0 refused below the cap", i)
		}
	}
	for _, zone := range []string{"eth1", ""} {
		if c := fromZone("fe80::1", zone); g.admit(c) != nil || !c.closed {
			t.Errorf("%s admitted past its host's cap of %d", c.peer, maxConnsPerClient)
		}
	}
	if c := fromZone("fe80:0:0:1::2", "eth0"); g.admit(c) == nil {
		t.Errorf("another host refused: the cap is per client")
	}
	if n := g.perClient[netip.MustParsePrefix("fe80::/64")]; n != maxConnsPerClient {
		t.Errorf("fe80::1 holds %d slots under its unzoned name, want %d (slots %v)", n, maxConnsPerClient, g.perClient)
	}
}

// The addresses of one IPv6 /64 are one client (issue 30 finding 13: slow
// requests from four addresses of one /64 held every slot): together they
// hold one share, and another /64 is admitted.
func TestConnGuard_oneSlash64IsOneClient(t *testing.T) {
	g := newConnGuard(nil)
	for i := range maxConnsPerClient {
		if g.admit(fromZone(fmt.Sprintf("2001:db8::%x", i+1), "")) == nil {
			t.Fatalf("connection %d from 2001:db8::/64 refused below the cap", i)
		}
	}
	for _, ip := range []string{"2001:db8::ffff", "2001:db8::1:2:3:4"} {
		if c := fromZone(ip, ""); g.admit(c) != nil || !c.closed {
			t.Errorf("%s admitted past its /64's cap of %d", ip, maxConnsPerClient)
		}
	}
	if g.admit(fromZone("2001:db8:0:1::1", "")) == nil {
		t.Error("a host of another /64 refused")
	}
}

// Clients that already hold connections, all busy, fill at most
// maxConns-newClientSlots; the rest go to clients holding none, so a new
// client is admitted even then.
func TestConnGuard_keepsSlotsForNewClients(t *testing.T) {
	g := newConnGuard(nil)
	busy := 0
	for h := range maxConns / maxConnsPerClient { // enough hosts to fill the cap with their shares
		for range maxConnsPerClient {
			if g.admit(fromZone(fmt.Sprintf("192.0.2.%d", 10+h), "")) != nil {
				busy++
			}
		}
	}
	if busy != maxConns-newClientSlots {
		t.Fatalf("clients holding connections hold %d slots, want %d", busy, maxConns-newClientSlots)
	}
	for i := range newClientSlots {
		if g.admit(fromZone(fmt.Sprintf("198.51.100.%d", i+1), "")) == nil {
			t.Errorf("new client %d refused while busy clients hold %d slots", i+1, busy)
		}
	}
	if c := fromZone("198.51.100.1", ""); g.admit(c) != nil {
		t.Error("a client holding a kept slot took a second one")
	}
	if n := len(g.conns); n != maxConns {
		t.Errorf("%d connections open, want the cap %d", n, maxConns)
	}
}

// Slow requests from four addresses of one IPv6 /64 (issue 30 finding 13:
// they took the endpoint to 0 % available) hold one client's share, and a
// host of another /64 is still answered. Real sockets, in a network
// namespace of the test's own where loopback gets the addresses.
func TestServer_oneSlash64CannotStarveTheEndpoint(t *testing.T) {
	if !testutil.InNetns(t) {
		return
	}
	testutil.IP(t, "link", "set", "lo", "up")
	slow := []string{"2001:db8::2", "2001:db8::3", "2001:db8::4", "2001:db8::5"}
	const other = "2001:db8:0:1::9"
	for _, a := range append(slices.Clone(slow), other) {
		testutil.IP(t, "-6", "addr", "add", a+"/128", "dev", "lo", "nodad")
	}
	s := New("[::1]:0", prometheus.NewRegistry(), okHealth, nil)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	for _, src := range slow {
		for range maxConnsPerClient {
			c := dialFrom(t, s, src)
			fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: localhost\r\n") // never finished
		}
	}
	if code, err := getFrom(s, other, "/api/health"); err != nil || code != http.StatusOK {
		t.Errorf("GET /api/health from another /64 while 4 addresses of one /64 hold %d half-sent requests: %d, %v", len(slow)*maxConnsPerClient, code, err)
	}
}
