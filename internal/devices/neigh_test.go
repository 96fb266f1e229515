package devices

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

const waitBound = 10 * time.Second

// TestNeighbours_phoneV4AndV6AreOneMAC: after the router talks to the
// phone over IPv4 and IPv6, the table names the phone's real MAC (the veth
// end's) for both addresses: ARP and NDP read together.
func TestNeighbours_phoneV4AndV6AreOneMAC(t *testing.T) {
	l := testutil.NewVethLAN(t)
	n, err := WatchNeighbours(NeighbourOptions{Open: opener(l)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	want, _ := ParseMAC(l.PhoneMAC)
	for _, a := range []netip.Addr{l.Phone4, l.Phone6} {
		poke(t, l, a)
		testutil.WaitFor(t, "the phone's MAC for "+a.String(), waitBound, func() bool {
			m, ok := n.MAC(a)
			return ok && m == want
		})
	}
	// An IPv4-mapped client (a dual-stack socket's) is the same client.
	if m, ok := n.MAC(netip.AddrFrom16(l.Phone4.As16())); !ok || m != want {
		t.Errorf("MAC(::ffff:%s) = %v %v, want %v", l.Phone4, m, ok, want)
	}
	if got := len(n.Addrs(want)); got != 2 {
		t.Errorf("Addrs(phone) has %d addresses, want 2 (v4 and v6)", got)
	}
}

// TestNeighbours_followsChangesAndFlaps: entries added, changed (the MAC
// flaps between two devices) and deleted after the start are followed by
// notification, and a flap is counted.
func TestNeighbours_followsChangesAndFlaps(t *testing.T) {
	l := testutil.NewVethLAN(t)
	n, err := WatchNeighbours(NeighbourOptions{Open: opener(l)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	a := netip.MustParseAddr("10.99.0.3")
	macs := []string{"02:00:5e:10:00:aa", "02:00:5e:10:00:bb"}
	for i, mac := range macs {
		testutil.IP(t, "-n", l.Router, "neigh", "replace", a.String(), "lladdr", mac, "dev", l.RouterIf, "nud", "permanent")
		want, _ := ParseMAC(mac)
		testutil.WaitFor(t, fmt.Sprintf("change %d to %s", i, mac), waitBound, func() bool {
			m, ok := n.MAC(a)
			return ok && m == want
		})
	}
	if s := n.Stats(); s.Flaps < 1 {
		t.Errorf("Flaps = %d after a MAC change, want ≥ 1", s.Flaps)
	}
	testutil.IP(t, "-n", l.Router, "neigh", "del", a.String(), "dev", l.RouterIf)
	testutil.WaitFor(t, "the deleted entry forgotten", waitBound, func() bool {
		_, ok := n.MAC(a)
		return !ok
	})
}

// TestNeighbours_thousandsStayBounded: a table of 3 000 entries (a flooded
// /20) is read and followed within the configured bound; what did not fit
// is counted as dropped, and nothing crashes.
func TestNeighbours_thousandsStayBounded(t *testing.T) {
	l := testutil.NewVethLAN(t)
	var batch strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&batch, "neigh replace 10.99.%d.%d lladdr 02:00:5e:20:%02x:%02x dev %s nud permanent\n",
			16+i/250, 1+i%250, i/256, i%256, l.RouterIf)
	}
	testutil.IP(t, "-n", l.Router, "route", "add", "10.99.0.0/16", "dev", l.RouterIf)
	// Half before the start (the dump), half after (notifications).
	lines := strings.SplitAfter(batch.String(), "\n")
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	if os.WriteFile(first, []byte(strings.Join(lines[:1500], "")), 0o600) != nil ||
		os.WriteFile(second, []byte(strings.Join(lines[1500:], "")), 0o600) != nil {
		t.Fatal("writing the batch files")
	}
	if out, err := exec.Command("ip", "-n", l.Router, "-batch", first).CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	const bound = 2000
	n, err := WatchNeighbours(NeighbourOptions{Open: opener(l), Max: bound})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	if out, err := exec.Command("ip", "-n", l.Router, "-batch", second).CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	testutil.WaitFor(t, "the table full and the rest dropped", waitBound, func() bool {
		s := n.Stats()
		return s.Entries == bound && s.Dropped >= 1000
	})
	if s := n.Stats(); s.Entries > bound {
		t.Fatalf("table holds %d entries, over its bound %d", s.Entries, bound)
	}
}

// TestParseMAC: the forms lease files and people write, and what is no
// device's address.
func TestParseMAC(t *testing.T) {
	for in, want := range map[string]string{
		"AA:bb:cc:dd:ee:f0":  "aa:bb:cc:dd:ee:f0",
		"aa-bb-cc-dd-ee-f0":  "aa:bb:cc:dd:ee:f0",
		"aabbccddeef0":       "aa:bb:cc:dd:ee:f0",
		"00:00:00:00:00:00":  "", // zero: no device
		"01:00:5e:00:00:01":  "", // multicast
		"aa:bb:cc:dd:ee":     "", // short
		"aa:bb-cc:dd:ee:f0":  "", // mixed separators
		"<b>aa:bb:cc:dd</b>": "", // markup
	} {
		m, ok := ParseMAC(in)
		if got := m.String(); got != want || ok != (want != "") {
			t.Errorf("ParseMAC(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
}

// TestKey: a device's key is its MAC when known, else its IPv4 address or
// its IPv6 /64.
func TestKey(t *testing.T) {
	for _, c := range []struct{ addr, mac, want string }{
		{"192.168.1.5", "aa:bb:cc:dd:ee:ff", "mac:aa:bb:cc:dd:ee:ff"},
		{"192.168.1.5", "", "ip:192.168.1.5"},
		{"::ffff:192.168.1.5", "", "ip:192.168.1.5"},
		{"2001:db8:1:2:aaaa::1", "", "ip:2001:db8:1:2::/64"},
	} {
		if got := Key(netip.MustParseAddr(c.addr), c.mac); got != c.want {
			t.Errorf("Key(%s, %q) = %q, want %q", c.addr, c.mac, got, c.want)
		}
	}
}
