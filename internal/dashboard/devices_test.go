package dashboard

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/web"
)

// TestPage_devicesFlagsNewWithAck: the devices page lists a new device
// under "New devices" with its MAC, its name (escaped) and an acknowledge
// button for its key; a known device is listed without one; the clients
// page points at the new device.
func TestPage_devicesFlagsNewWithAck(t *testing.T) {
	h := history.Open(history.Options{MaxBytes: 1 << 20, MaxAge: time.Hour, Flush: time.Hour})
	t.Cleanup(func() { h.Close() })
	d := New(Deps{History: h, Devices: func() []devices.Device {
		return []devices.Device{
			{Key: "mac:02:00:5e:00:00:0a", MAC: "02:00:5e:00:00:0a", Name: "<b>visitor</b>", Addr: "192.168.1.77", New: true, FirstSeen: now},
			{Key: "id:kids-tablet", ClientID: "kids-tablet", Name: "Tablet", Configured: true, LastSeen: now},
		}
	}})
	s := web.New("127.0.0.1:0", prometheus.NewRegistry(), func() web.Health { return web.Health{} }, nil)
	d.Register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Addr().(*net.TCPAddr).Port))
	get := func(path string) string {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	page := get("/devices")
	if clients := get("/clients"); !strings.Contains(clients, `id="new-devices-note"`) || !strings.Contains(clients, "1 new device to look at") {
		t.Error("the clients page does not point at the new device")
	}
	newPart, knownPart, _ := strings.Cut(page, `id="known-devices"`)
	for _, want := range []string{`data-post="/api/devices/ack" data-client="mac:02:00:5e:00:00:0a"`, "02:00:5e:00:00:0a", "&lt;b&gt;visitor&lt;/b&gt;", "<strong>new</strong>"} {
		if !strings.Contains(newPart, want) {
			t.Errorf("new devices part lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>visitor") {
		t.Error("a device name is not escaped")
	}
	if !strings.Contains(knownPart, "kids-tablet") || strings.Contains(knownPart, "acknowledge") {
		t.Errorf("known part: want the ClientID device without an acknowledge button:\n%s", knownPart)
	}
}

// TestPage_clientShowsItsMAC: a client's page names the MAC of the device
// at that address, linked to a search of its queries by MAC.
func TestPage_clientShowsItsMAC(t *testing.T) {
	h := history.Open(history.Options{MaxBytes: 1 << 20, MaxAge: 48 * time.Hour, Flush: time.Hour, Now: func() time.Time { return now }})
	t.Cleanup(func() { h.Close() })
	h.Record(&query.Event{Time: now.Add(-time.Minute), Client: netip.MustParseAddr("192.168.1.77"), ClientMAC: "02:00:5e:00:00:0a",
		Name: "a.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET, Proto: query.UDP, Source: query.SourcePool, Rcode: dns.RcodeSuccess})
	d := New(Deps{History: h, Now: func() time.Time { return now }})
	s := web.New("127.0.0.1:0", prometheus.NewRegistry(), func() web.Health { return web.Health{} }, nil)
	d.Register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	resp, err := http.Get("http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Addr().(*net.TCPAddr).Port)) + "/clients/192.168.1.77")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `<a href="/queries?client=02%3a00%3a5e%3a00%3a00%3a0a" id="client-mac">02:00:5e:00:00:0a</a>`) {
		t.Errorf("client page lacks the device's MAC:\n%s", b)
	}
}
