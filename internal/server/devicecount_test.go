package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestDevices_aMissIsOneQueryOfTheDevice: a UDP query the fast path cannot
// answer (a cache miss) and the general path then answers is one query of
// its device, as a hit is (docs/reference/metrics.md, the device query
// counts): the fast path must not note the device a second time.
func TestDevices_aMissIsOneQueryOfTheDevice(t *testing.T) {
	mac := devices.MAC{2, 0, 0x5e, 0, 0x53, 7}
	reg := devices.NewRegistry(nil)
	reg.SetNeighbours(devices.FixedNeighbours(map[netip.Addr]devices.MAC{netip.MustParseAddr("127.0.0.1"): mac}))
	view := devices.NewView(reg, devices.ViewOptions{Static: devices.Static{ByMAC: map[devices.MAC]string{mac: "phone"}}})
	c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	s := startServer(t, &State{Router: pool(instant()), Allow: loopback, Stages: []query.Stage{st}, Devices: view})
	q := newQuery("bench.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	// A miss, a hit that leaves the wire template, a fast-path hit.
	for i := range 3 {
		if m := exchange(t, "udp", udpAddr(s), q); m.Rcode != dns.RcodeSuccess {
			t.Fatalf("query %d: %v", i, m)
		}
	}
	testutil.WaitFor(t, "the third query answered by the fast path", 2*time.Second, func() bool { return s.stats.fastAnswers.Load() == 1 })
	list := reg.List()
	if len(list) != 1 || list[0].Queries != 3 {
		t.Errorf("devices %+v: want the phone with 3 queries", list)
	}
}
