package devices

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/query"
)

func mustMAC(s string) MAC {
	m, ok := ParseMAC(s)
	if !ok {
		panic(s)
	}
	return m
}

// TestView_namePrecedence: a configured name (by ClientID, MAC, address)
// wins over a learned one (the ClientID itself, a lease, PTR), and a
// learned name equal to a configured client or group name is not used,
// a PTR name included.
func TestView_namePrecedence(t *testing.T) {
	dir := t.TempDir()
	leases := filepath.Join(dir, "dnsmasq.leases")
	os.WriteFile(leases, []byte(
		"1 02:00:5e:00:00:01 192.168.1.10 lease-name\n"+
			"1 02:00:5e:00:00:02 192.168.1.11 kids\n"+ // a group's name: not taken
			"1 02:00:5e:00:00:03 192.168.1.12 dad-laptop\n"), 0o600) // a [[clients]] name: not taken
	l := NewLeases([]LeaseFile{{Format: FormatDnsmasq, Path: leases}}, nil, false)
	reg := NewRegistry(nil)
	v := NewView(reg, ViewOptions{
		Static: Static{
			ByMAC:    map[MAC]string{mustMAC("02:00:5e:00:00:09"): "dad-laptop"},
			ByID:     map[string]string{"kids-tablet": "Tablet"},
			ByAddr:   map[netip.Addr]string{netip.MustParseAddr("192.168.1.99"): "printer"},
			Reserved: map[string]bool{"dad-laptop": true, "Tablet": true, "printer": true, "kids": true},
		},
		Leases: l,
		PTR: func(a netip.Addr) string {
			if a == netip.MustParseAddr("192.168.1.63") {
				return "dad-laptop" // the router serves the name the device chose
			}
			return "ptr-name"
		},
	})
	for _, c := range []struct {
		addr, mac, id string
		want          string
	}{
		{"192.168.1.50", "02:00:5e:00:00:09", "", "dad-laptop"},
		{"192.168.1.50", "", "KIDS-tablet", "Tablet"},
		{"192.168.1.50", "", "phone", "phone"},
		{"192.168.1.50", "", "kids", "ptr-name"}, // a ClientID named like a group
		{"192.168.1.99", "02:00:5e:00:00:01", "", "printer"},
		{"192.168.1.60", "02:00:5e:00:00:01", "", "lease-name"},
		{"192.168.1.10", "", "", "lease-name"},
		{"192.168.1.61", "02:00:5e:00:00:02", "", "ptr-name"},
		{"192.168.1.62", "02:00:5e:00:00:03", "", "ptr-name"},
		{"192.168.1.63", "", "", ""}, // a PTR name that is a [[clients]] name
	} {
		ev := &query.Event{Client: netip.MustParseAddr(c.addr), ClientMAC: c.mac, ClientID: c.id}
		v.Identify(ev)
		if ev.ClientName != c.want {
			t.Errorf("%s mac %q id %q: name %q, want %q", c.addr, c.mac, c.id, ev.ClientName, c.want)
		}
	}
	if s := reg.Stats(); s.Collisions < 4 {
		t.Errorf("Collisions = %d, want ≥ 4", s.Collisions)
	}
}

// TestView_learnedNameThatIsAnAddress: a host name a device chose that is
// an IP address (an ISC dhcpd client-hostname is the client's own text)
// is not used as its name: a client's name and its address share one
// namespace where a per-client pause is kept (internal/filter's pauses,
// keyed by address or name), so the kid's tablet named "192.168.1.50"
// would be unfiltered whenever dad's laptop at 192.168.1.50 is paused.
// It is counted as a collision.
func TestView_learnedNameThatIsAnAddress(t *testing.T) {
	leases := filepath.Join(t.TempDir(), "dnsmasq.leases")
	os.WriteFile(leases, []byte("1 02:00:5e:00:00:21 192.168.1.21 192.168.1.50\n1 02:00:5e:00:00:22 192.168.1.22 fd00::50\n"), 0o600)
	reg := NewRegistry(nil)
	v := NewView(reg, ViewOptions{Leases: NewLeases([]LeaseFile{{Format: FormatDnsmasq, Path: leases}}, nil, false),
		PTR: func(a netip.Addr) string { return "10.0.0.1" }})
	for _, addr := range []string{"192.168.1.21", "192.168.1.22"} {
		ev := &query.Event{Client: netip.MustParseAddr(addr)}
		v.Identify(ev)
		if ev.ClientName != "" {
			t.Errorf("%s: name %q, want none (an address is no device name)", addr, ev.ClientName)
		}
	}
	if s := reg.Stats(); s.Collisions < 4 {
		t.Errorf("Collisions = %d, want ≥ 4 (two lease names, two PTR names)", s.Collisions)
	}
}

// TestRegistry_newDeviceOnceAckedAndKept: a device seen for the first
// time is new, logged and counted once however often it asks; an
// acknowledgement clears it; a restart (a new registry over the same
// state directory) remembers both the device and the acknowledgement,
// and a device still unacknowledged is still new.
func TestRegistry_newDeviceOnceAckedAndKept(t *testing.T) {
	dir := t.TempDir()
	core, logs := observer.New(zap.InfoLevel)
	reg := NewRegistry(zap.New(core))
	if err := reg.UseStateDir(dir); err != nil {
		t.Fatal(err)
	}
	v := NewView(reg, ViewOptions{Static: Static{ByMAC: map[MAC]string{mustMAC("02:00:5e:00:00:0c"): "configured"}}})
	ask := func(mac string) *query.Event {
		ev := &query.Event{Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: mac}
		v.Identify(ev)
		return ev
	}
	for range 3 {
		if ev := ask("02:00:5e:00:00:0a"); !ev.NewDevice {
			t.Fatal("a first-seen device is not new")
		}
	}
	ask("02:00:5e:00:00:0b")
	if ev := ask("02:00:5e:00:00:0c"); ev.NewDevice {
		t.Error("a [[clients]] device is new")
	}
	if n := logs.FilterMessage("new device").Len(); n != 2 {
		t.Errorf("%d new-device lines, want 2 (once per unconfigured device)", n)
	}
	if s := reg.Stats(); s.NewTotal != 2 || s.New != 2 {
		t.Errorf("stats %+v, want NewTotal 2, New 2", s)
	}
	if !reg.Ack("mac:02:00:5e:00:00:0a") {
		t.Fatal("Ack of a known device failed")
	}
	if reg.Ack("mac:02:00:5e:00:00:ff") {
		t.Error("Ack of an unknown device succeeded")
	}
	if ev := ask("02:00:5e:00:00:0a"); ev.NewDevice {
		t.Error("an acknowledged device is still new")
	}
	reg.Close() // writes what is pending

	core2, logs2 := observer.New(zap.InfoLevel)
	reg2 := NewRegistry(zap.New(core2))
	if err := reg2.UseStateDir(dir); err != nil {
		t.Fatal(err)
	}
	defer reg2.Close()
	v2 := NewView(reg2, ViewOptions{})
	evA := &query.Event{Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: "02:00:5e:00:00:0a"}
	v2.Identify(evA)
	evB := &query.Event{Client: netip.MustParseAddr("192.168.1.6"), ClientMAC: "02:00:5e:00:00:0b"}
	v2.Identify(evB)
	if evA.NewDevice || !evB.NewDevice {
		t.Errorf("after a restart: acknowledged new=%v (want false), unacknowledged new=%v (want true)", evA.NewDevice, evB.NewDevice)
	}
	if n := logs2.FilterMessage("new device").Len(); n != 0 {
		t.Errorf("after a restart %d new-device lines, want 0: they were logged before", n)
	}
}

// TestRegistry_bounded: forged MACs past the bound evict the devices seen
// longest ago; the registry never holds more than its bound.
func TestRegistry_bounded(t *testing.T) {
	reg := NewRegistry(nil)
	reg.max = 64
	v := NewView(reg, ViewOptions{})
	for i := range 1000 {
		ev := &query.Event{Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: fmt.Sprintf("02:00:5e:00:%02x:%02x", i/256, i%256)}
		v.Identify(ev)
	}
	if s := reg.Stats(); s.Devices > 64 || s.Evicted == 0 {
		t.Errorf("stats %+v: want at most 64 devices and some evicted", s)
	}
}

// TestRegistry_floodKeepsAcknowledgedDevices: a flood of self-chosen
// identities (ClientIDs over DoH, which any client may send, or forged
// MACs from a forwarder) past the bound evicts the flood's own new
// devices, not an acknowledged device that has been quiet longer: were it
// forgotten, its next query would make it new again, and put it back in
// the devices.new_devices group (another device's settings changed by
// the flood; issue 32's bad input).
func TestRegistry_floodKeepsAcknowledgedDevices(t *testing.T) {
	reg := NewRegistry(nil)
	reg.max = 64
	v := NewView(reg, ViewOptions{})
	tv := &query.Event{Time: time.Unix(1000, 0), Client: netip.MustParseAddr("192.168.1.20"), ClientMAC: "02:00:5e:00:53:20"}
	v.Identify(tv)
	if !tv.NewDevice || !reg.Ack("mac:02:00:5e:00:53:20") {
		t.Fatalf("the TV: new %v, want new and then acknowledged", tv.NewDevice)
	}
	for i := range 1000 {
		v.Identify(&query.Event{Time: time.Unix(2000+int64(i), 0), Client: netip.MustParseAddr("192.168.1.66"), ClientID: fmt.Sprintf("flood-%d", i)})
	}
	tv = &query.Event{Time: time.Unix(5000, 0), Client: netip.MustParseAddr("192.168.1.20"), ClientMAC: "02:00:5e:00:53:20"}
	v.Identify(tv)
	if tv.NewDevice {
		t.Errorf("the acknowledged TV is new again after a flood of %d ClientIDs (stats %+v)", 1000, reg.Stats())
	}
}

// TestValidClientID: one DNS label; markup and 10 kB are refused whole.
func TestValidClientID(t *testing.T) {
	for id, want := range map[string]bool{
		"kids-tablet":                true,
		"A1":                         true,
		"":                           false,
		"-x":                         false,
		"x-":                         false,
		"<script>":                   false,
		"a.b":                        false,
		string(make([]byte, 10<<10)): false,
		"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123":  true,
		"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234": false,
	} {
		if got := ValidClientID(id); got != want {
			t.Errorf("ValidClientID(%.20q) = %v, want %v", id, got, want)
		}
	}
}

// BenchmarkIdentify_1000Devices is the per-query cost of naming a client
// among 1 000 known devices, each with an IPv4 address in the neighbour
// table and a lease name.
func BenchmarkIdentify_1000Devices(b *testing.B) {
	reg := NewRegistry(nil)
	table := map[netip.Addr]MAC{}
	var lines []byte
	addrs := make([]netip.Addr, 1000)
	for i := range addrs {
		addrs[i] = netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(1 + i%250)})
		mac := MAC{2, 0, 0x5e, 0, byte(i >> 8), byte(i)}
		table[addrs[i]] = mac
		lines = fmt.Appendf(lines, "1 %s %s host-%d\n", mac, addrs[i], i)
	}
	reg.SetNeighbours(FixedNeighbours(table))
	path := filepath.Join(b.TempDir(), "leases")
	os.WriteFile(path, lines, 0o600)
	v := NewView(reg, ViewOptions{Leases: NewLeases([]LeaseFile{{Format: FormatDnsmasq, Path: path}}, nil, false)})
	for _, a := range addrs {
		v.Identify(&query.Event{Client: a})
	}
	b.ReportAllocs()
	b.ResetTimer()
	var ev query.Event
	now := time.Now() // the server sets each event's arrival time
	for i := range b.N {
		ev = query.Event{Time: now, Client: addrs[i%len(addrs)]}
		v.Identify(&ev)
	}
	if ev.ClientName == "" || ev.ClientMAC == "" {
		b.Fatal("not identified")
	}
}

// TestAPI_listAndAck: the list names a new device; acknowledging it by its
// key (or MAC) clears the flag; an unknown device is 404, garbage is 400.
func TestAPI_listAndAck(t *testing.T) {
	reg := NewRegistry(nil)
	v := NewView(reg, ViewOptions{})
	v.Identify(&query.Event{Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: "02:00:5e:00:00:0a"})
	list := func() ListAnswer {
		rec := httptest.NewRecorder()
		reg.ListHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/devices", nil))
		var a ListAnswer
		if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := list(); a.New != 1 || len(a.Devices) != 1 || !a.Devices[0].New || a.Devices[0].MAC != "02:00:5e:00:00:0a" || a.Devices[0].Addr != "192.168.1.5" {
		t.Fatalf("list %+v, want one new device with its MAC and address", a)
	}
	for client, want := range map[string]int{"02:00:5E:00:00:0A": 200, "mac:02:00:5e:00:00:ff": 404, "<b>": 400, "": 400} {
		rec := httptest.NewRecorder()
		reg.AckHandler().ServeHTTP(rec, httptest.NewRequest("POST", "/api/devices/ack?client="+url.QueryEscape(client), nil))
		if rec.Code != want {
			t.Errorf("ack %q: %d %s, want %d", client, rec.Code, rec.Body, want)
		}
	}
	if a := list(); a.New != 0 || a.Devices[0].New {
		t.Errorf("after ack: %+v, want no new device", a)
	}
}

// TestRegistry_newDeviceLinesBounded: a flood of new devices (forged MACs
// from a trusted forwarder) is logged at most 60 times an hour plus one
// line that says so; every one is still counted.
func TestRegistry_newDeviceLinesBounded(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	reg := NewRegistry(zap.New(core))
	v := NewView(reg, ViewOptions{})
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i := range 500 {
		v.Identify(&query.Event{Time: now, Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: fmt.Sprintf("02:00:5e:00:%02x:%02x", i/256, i%256)})
	}
	if n := logs.FilterMessage("new device").Len(); n != maxNewLogsPerHour {
		t.Errorf("%d new-device lines, want %d", n, maxNewLogsPerHour)
	}
	if n := logs.FilterMessageSnippet("many new devices").Len(); n != 1 {
		t.Errorf("%d suppression lines, want 1", n)
	}
	if s := reg.Stats(); s.NewTotal != 500 {
		t.Errorf("NewTotal = %d, want 500", s.NewTotal)
	}
	v.Identify(&query.Event{Time: now.Add(time.Hour), Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: "02:00:5e:00:ff:ff"})
	if n := logs.FilterMessage("new device").Len(); n != maxNewLogsPerHour+1 {
		t.Errorf("an hour later: %d new-device lines, want one more", n)
	}
}

// TestRegistry_unreadableFileLeftAlone: a devices file that is too large
// is reported, and neither read nor overwritten: a new device is kept in
// memory only.
func TestRegistry_unreadableFileLeftAlone(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, DevicesFile)
	big := make([]byte, maxDevicesFileBytes+1)
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry(nil)
	if err := reg.UseStateDir(dir); err == nil || !strings.Contains(err.Error(), "memory only") {
		t.Fatalf("UseStateDir over an oversized file: %v, want an error that says memory only", err)
	}
	NewView(reg, ViewOptions{}).Identify(&query.Event{Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: "02:00:5e:00:00:0a"})
	reg.Close()
	if b, _ := os.ReadFile(path); len(b) != len(big) {
		t.Errorf("the unreadable file was overwritten (%d bytes now)", len(b))
	}
}
