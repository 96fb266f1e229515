package query

import (
	"net"
	"net/netip"
	"testing"
)

// A link-local peer's zone and a dual-stack socket's 4-in-6 form do not
// make another client: ClientOf and its two parsers name the address a
// prefix matches.
func TestClientOf_dropsZoneAndUnmaps(t *testing.T) {
	linkLocal := netip.MustParsePrefix("fe80::/10")
	for _, tc := range []struct{ in, want string }{
		{"fe80::1%eth0", "fe80::1"},
		{"fe80::1%3", "fe80::1"},
		{"fe80::1", "fe80::1"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"192.0.2.7", "192.0.2.7"},
		{"2001:db8::1", "2001:db8::1"},
	} {
		want := netip.MustParseAddr(tc.want)
		if got := ClientOf(netip.MustParseAddr(tc.in)); got != want {
			t.Errorf("ClientOf(%s) = %v, want %v", tc.in, got, want)
		}
		ap := netip.AddrPortFrom(netip.MustParseAddr(tc.in), 40000)
		if got := ClientOfRemote(ap.String()); got != want {
			t.Errorf("ClientOfRemote(%q) = %v, want %v", ap.String(), got, want)
		}
		tcp, udp := net.TCPAddrFromAddrPort(ap), net.UDPAddrFromAddrPort(ap)
		if got := ClientOfNet(tcp); got != want {
			t.Errorf("ClientOfNet(tcp %v) = %v, want %v", tcp, got, want)
		}
		if got := ClientOfNet(udp); got != want {
			t.Errorf("ClientOfNet(udp %v) = %v, want %v", udp, got, want)
		}
	}
	if c := ClientOf(netip.MustParseAddr("fe80::1%eth0")); !linkLocal.Contains(c) {
		t.Errorf("%v is outside %v", c, linkLocal)
	}
	for _, bad := range []string{"", "fe80::1", "[fe80::1%eth0]", "host:53"} {
		if got := ClientOfRemote(bad); got.IsValid() {
			t.Errorf("ClientOfRemote(%q) = %v, want the zero Addr", bad, got)
		}
	}
	if got := ClientOfNet(&net.UnixAddr{Name: "/run/x", Net: "unix"}); got.IsValid() {
		t.Errorf("ClientOfNet(unix) = %v, want the zero Addr", got)
	}
}
