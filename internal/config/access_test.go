package config

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestUpstream_durations(t *testing.T) {
	u := Default().Upstream
	if u.Attempt() != 2*time.Second || u.Total() != 4*time.Second || u.Read() != 3*time.Second {
		t.Errorf("Attempt, Total, Read = %v, %v, %v; want 2.5s, 5s, 3s", u.Attempt(), u.Total(), u.Read())
	}
	d := Default().DNS
	if d.MinTTL() != 0 || d.MaxTTL() != 24*time.Hour || d.StaleAge() != 24*time.Hour {
		t.Errorf("MinTTL, MaxTTL, StaleAge = %v, %v, %v; want 0, 24h, 24h", d.MinTTL(), d.MaxTTL(), d.StaleAge())
	}
}

func TestEnabledUpstreams_priorityThenFileOrder(t *testing.T) {
	off := false
	c := Config{Upstreams: []UpstreamURL{
		{URL: "a", Priority: 1},
		{URL: "b", Priority: 0},
		{URL: "c", Priority: 1},
		{URL: "d", Priority: -1, Enabled: &off},
		{URL: "e", Priority: 0},
		{URL: "f", Priority: 1},
	}}
	var got []string
	for _, u := range c.EnabledUpstreams() {
		got = append(got, u.URL)
	}
	if want := []string{"b", "e", "a", "c", "f"}; !slices.Equal(got, want) {
		t.Errorf("order = %q, want %q", got, want)
	}
	if c.Upstreams[0].URL != "a" {
		t.Error("EnabledUpstreams reordered the Config's own slice")
	}
}

func TestForwardZone_FQDNAndTarget(t *testing.T) {
	for _, tc := range []struct {
		zone, resolver, fqdn, network string
		addr                          netip.AddrPort
	}{
		{"LAN", "udp://192.168.1.1:53", "lan.", NetworkUDP, netip.MustParseAddrPort("192.168.1.1:53")},
		{"168.192.In-Addr.Arpa.", "TCP://[fd00::1]:5353", "168.192.in-addr.arpa.", NetworkTCP, netip.MustParseAddrPort("[fd00::1]:5353")},
		{"home.arpa", "udp://[::ffff:192.168.1.1]:53", "home.arpa.", NetworkUDP, netip.MustParseAddrPort("192.168.1.1:53")},
		{"bad", "udp://router:53", "bad.", "", netip.AddrPort{}},
	} {
		z := ForwardZone{Zone: tc.zone, Resolver: tc.resolver}
		if got := z.FQDN(); got != tc.fqdn {
			t.Errorf("FQDN(%q) = %q, want %q", tc.zone, got, tc.fqdn)
		}
		if network, addr := z.Target(); network != tc.network || addr != tc.addr {
			t.Errorf("Target(%q) = %s %s, want %s %s", tc.resolver, network, addr, tc.network, tc.addr)
		}
	}
}

func TestDNS_AddrsAndAllowed(t *testing.T) {
	d := DNS{
		Listen: []string{"127.0.0.1:53", "bad", "[::1]:53"},
		Allow:  []string{"192.168.1.7/24", "bad", "fd00::/8"},
	}
	wantAddrs := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53"), netip.MustParseAddrPort("[::1]:53")}
	if got := d.Addrs(); !slices.Equal(got, wantAddrs) {
		t.Errorf("Addrs = %v, want %v", got, wantAddrs)
	}
	wantAllowed := []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("fd00::/8")}
	if got := d.Allowed(); !slices.Equal(got, wantAllowed) {
		t.Errorf("Allowed = %v, want %v", got, wantAllowed)
	}
}

func TestWeb_Addr(t *testing.T) {
	if _, ok := (Web{}).Addr(); ok {
		t.Error("empty web.listen: Addr ok = true, want false (disabled)")
	}
	if ap, ok := (Web{Listen: "127.0.0.1:9153"}).Addr(); !ok || ap != netip.MustParseAddrPort("127.0.0.1:9153") {
		t.Errorf("Addr = %v, %v", ap, ok)
	}
}

func TestConfig_ClientNames(t *testing.T) {
	c := Config{Clients: []Client{
		{IP: "192.168.1.10", Name: "laptop"},
		{IP: "::ffff:192.168.1.11", Name: "phone"},
		{IP: "fd00::12", Name: "tv"},
	}}
	want := map[netip.Addr]string{
		netip.MustParseAddr("192.168.1.10"): "laptop",
		netip.MustParseAddr("192.168.1.11"): "phone",
		netip.MustParseAddr("fd00::12"):     "tv",
	}
	if got := c.ClientNames(); !maps.Equal(got, want) {
		t.Errorf("ClientNames = %v, want %v", got, want)
	}
}

func TestProblem_String(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Path: "upstreams[1].url", Message: "m", Line: 7}, "upstreams[1].url: m (line 7)"},
		{Problem{Path: "upstreams", Message: "m"}, "upstreams: m"},
		{Problem{Message: "m", Line: 2}, "m (line 2)"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestProblems_error(t *testing.T) {
	ps := Problems{{Path: "a", Message: "one"}, {Path: "b", Message: "two", Line: 3}}
	if got, want := ps.Error(), "a: one\nb: two (line 3)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if Problems(nil).Err() != nil {
		t.Error("empty Problems: Err() != nil")
	}
	var got Problems
	if !errors.As(ps.Err(), &got) || len(got) != 2 {
		t.Errorf("errors.As(Err()) = %v", got)
	}
}
