package server

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/rebind"
	"github.com/nxdns/nxdns/internal/wireform"
)

// BenchmarkCacheHit_household is a cache hit with every household feature
// of issue 32 on ("on") against all of them off ("off"), through the
// general path and the UDP fast path: the client is a device known by its
// MAC (a neighbour table of 1 000 devices, a [[clients]] mac name), in a
// group with every catalogue service, every safe-search engine and its own
// upstream pool; rebinding protection and a per-device rate limit that
// does not exempt the client are on. "off" has no devices, no group, no
// guard and no limit; the cases between turn on one feature each, to say
// where a difference comes from. docs/performance.md "Household switches"
// compares, in instructions, this benchmark and the real binary.
func BenchmarkCacheHit_household(b *testing.B) {
	client := netip.MustParseAddr("127.0.0.1")
	// Each feature alone, then all of them: "off" and "on" are the pair
	// the docs compare; the others say where the difference comes from.
	for _, tc := range []struct {
		name                                  string
		devices, switches, pool, guard, limit bool
	}{
		{name: "off"},
		{name: "devices", devices: true},
		{name: "switches", switches: true},
		{name: "pool", pool: true},
		{name: "rebinding", guard: true},
		{name: "ratelimit", limit: true},
		{name: "on", devices: true, switches: true, pool: true, guard: true, limit: true},
	} {
		name := tc.name
		f := config.FilterDefaults()
		kids := config.FilterGroup{Name: "kids", Clients: []string{"kids-tablet", "127.0.0.1"}}
		st := &State{Allow: loopback}
		answer := answerA("192.0.2.1")
		st.Router = pool(answer)
		if tc.devices {
			st.Devices = householdDevices(client)
		}
		if tc.switches {
			kids.Services, kids.SafeSearch = catalog.Services().IDs(), catalog.Engines
		}
		if tc.pool {
			kids.Upstreams = []string{"tls://192.0.2.53"}
			st.Router = pools{main: answer, kids: answer}
		}
		if tc.guard {
			st.Guard = rebind.New(rebind.Options{})
		}
		if tc.limit {
			// The client is not exempt, and no run of the loop can spend the
			// bucket: a million a second ran dry when the fast path went faster.
			st.Limit = NewRateLimiter(1<<30, 1<<30, nil)
		}
		f.Groups = []config.FilterGroup{{Name: "default"}}
		if tc.switches || tc.pool {
			f.Groups = append(f.Groups, kids)
		}
		e := filter.New(filter.Options{})
		e.Update(f)
		fs := e.NewStage(config.Config{Filter: f}, time.UTC)
		c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
		cs := c.Stage()
		st.Stages = []query.Stage{fs, cs}
		s := New(Options{}, st)
		ctx := context.Background()
		if tc.switches { // the group applies: its switches are what is measured
			q := newQuery("www.tiktok.com.", dns.TypeA)
			wire, _ := q.Pack()
			out := new(dns.Msg)
			if err := out.Unpack(s.handle(ctx, wire, client, query.UDP)); err != nil || len(out.Answer) == 0 || out.Answer[0].(*dns.A).A.String() != "0.0.0.0" {
				b.Fatalf("www.tiktok.com for the kids' device: %v %v, want the block", err, out.Answer)
			}
		}
		const qname = "h1.hit.example." // a name of no switch, as most are
		q := newQuery(qname, dns.TypeA)
		q.SetEdns0(1232, false)
		wire, _ := q.Pack()
		for range 2 {
			s.handle(ctx, wire, client, query.UDP)
		}
		b.Run(name+"/general", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.handle(ctx, wire, client, query.UDP) == nil {
					b.Fatal("no answer")
				}
			}
		})
		b.Run(name+"/fast", func(b *testing.B) {
			var qname [wireform.MaxName]byte
			dst := make([]byte, 0, maxUDPAnswer)
			var scratch query.Event
			b.ReportAllocs()
			for b.Loop() {
				out, gen, ev, ok := s.answerFast(wire, &qname, client, dst, &scratch)
				if !ok || len(out) == 0 {
					b.Fatal("not answered by the fast path")
				}
				s.finishFast(gen, ev, true)
			}
		})
		cs.Close()
		c.Close()
		e.Close()
	}
}

// householdDevices is a device view whose neighbour table holds client
// and 999 other devices, client's MAC named "kids-tablet" by [[clients]].
func householdDevices(client netip.Addr) *devices.View {
	table := map[netip.Addr]devices.MAC{}
	for i := range 999 {
		table[netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(1 + i%250)})] = devices.MAC{2, 0, 0x5e, 0, byte(i >> 8), byte(i)}
	}
	mac := devices.MAC{2, 0, 0x5e, 0x10, 0, 2}
	table[client] = mac
	reg := devices.NewRegistry(nil)
	reg.SetNeighbours(devices.FixedNeighbours(table))
	return devices.NewView(reg, devices.ViewOptions{Static: devices.Static{
		ByMAC: map[devices.MAC]string{mac: "kids-tablet"}, ByID: map[string]string{},
		ByAddr: map[netip.Addr]string{}, Reserved: map[string]bool{"kids-tablet": true, "kids": true, "default": true},
	}})
}
