package localnet

import (
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

func TestPrefixOf_masksAndDropsZone(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		want string
	}{
		{"192.168.1.7/24", "192.168.1.0/24"},
		{"2001:db8:1:2::5/64", "2001:db8:1:2::/64"},
		{"fe80::1/64", "fe80::/64"},
		{"10.8.0.1/32", "10.8.0.1/32"},
	} {
		ip, ipn, err := net.ParseCIDR(tc.cidr)
		if err != nil {
			t.Fatal(err)
		}
		ipn.IP = ip // an interface address keeps its host bits
		got, ok := prefixOf(ipn)
		if !ok || got.String() != tc.want {
			t.Errorf("prefixOf(%s) = %v, %v; want %s", tc.cidr, got, ok, tc.want)
		}
	}
	v4in16 := &net.IPNet{IP: net.ParseIP("192.0.2.9"), Mask: net.CIDRMask(24, 32)} // 16-byte form
	if got, ok := prefixOf(v4in16); !ok || got.String() != "192.0.2.0/24" {
		t.Errorf("16-byte IPv4: %v, %v", got, ok)
	}
	if _, ok := prefixOf(&net.IPAddr{IP: net.ParseIP("192.0.2.1")}); ok {
		t.Error("a bare address has no prefix")
	}
}

func TestPrefixes_includesLoopbackSortedUnique(t *testing.T) {
	ps, err := Prefixes()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range loopback {
		if !slices.Contains(ps, want) {
			t.Errorf("%v lacks loopback %v", ps, want)
		}
	}
	if n := normalize(slices.Clone(ps)); !slices.Equal(n, ps) {
		t.Errorf("not normalized: %v", ps)
	}
}

// TestWatcher_followsInterfaces runs in a network namespace of its own (the
// test binary re-executes itself under `unshare -rn`), adds and removes
// addresses and an interface with ip(8), and waits for each change to reach
// the watcher through the kernel's notifications.
func TestWatcher_followsInterfaces(t *testing.T) {
	if !testutil.InNetns(t) {
		return
	}
	var last atomic.Pointer[[]netip.Prefix] // the set of the latest onChange call
	w, err := Watch(func(ps []netip.Prefix) { last.Store(&ps) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// changed waits for an onChange call whose set satisfies ok, and checks
	// that Prefixes says the same.
	changed := func(what string, ok func([]netip.Prefix) bool) {
		t.Helper()
		testutil.WaitFor(t, what, 5*time.Second, func() bool { ps := last.Load(); return ps != nil && ok(*ps) })
		if ps := *last.Load(); !slices.Equal(ps, w.Prefixes()) {
			t.Errorf("%s: onChange got %v, Prefixes says %v", what, ps, w.Prefixes())
		}
	}
	if w.sock == nil {
		t.Fatal("no netlink socket: the watcher fell back to polling")
	}
	v4 := netip.MustParsePrefix("192.0.2.0/24")
	v6 := netip.MustParsePrefix("2001:db8:1::/64") // a global-scope prefix
	dummy := netip.MustParsePrefix("198.51.100.0/24")

	testutil.IP(t, "link", "set", "lo", "up")
	testutil.IP(t, "addr", "add", "192.0.2.1/24", "dev", "lo")
	changed("IPv4 address added", func(ps []netip.Prefix) bool { return slices.Contains(ps, v4) })
	testutil.IP(t, "-6", "addr", "add", "2001:db8:1::1/64", "dev", "lo", "nodad")
	changed("global IPv6 address added", func(ps []netip.Prefix) bool { return slices.Contains(ps, v6) })
	testutil.IP(t, "addr", "del", "192.0.2.1/24", "dev", "lo")
	changed("IPv4 address removed", func(ps []netip.Prefix) bool { return !slices.Contains(ps, v4) })

	testutil.IP(t, "link", "add", "nx0", "type", "bridge")
	testutil.IP(t, "addr", "add", "198.51.100.1/24", "dev", "nx0")
	if slices.Contains(w.Prefixes(), dummy) {
		// Not a timing claim: the address is on a link that is down, and a
		// rescan triggered by it must not count it.
		t.Errorf("a down interface's prefix is local: %v", w.Prefixes())
	}
	testutil.IP(t, "link", "set", "nx0", "up")
	changed("interface up", func(ps []netip.Prefix) bool { return slices.Contains(ps, dummy) })
	testutil.IP(t, "link", "del", "nx0")
	changed("interface removed", func(ps []netip.Prefix) bool { return !slices.Contains(ps, dummy) })
}

func TestWatcher_closeStopsEverything(t *testing.T) {
	w, err := Watch(func([]netip.Prefix) {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		w.trigger() // a rescan may be running when Close comes
	}
	w.Close()
	w.Close() // idempotent
}
