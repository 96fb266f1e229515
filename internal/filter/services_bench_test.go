package filter

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/query"
)

// BenchmarkCatalogue_load is the catalogue's cost at start: parsing the
// embedded services.txt and building the domain index (once per process).
func BenchmarkCatalogue_load(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		cat, err := catalog.Parse(catalog.Text())
		if err != nil {
			b.Fatal(err)
		}
		buildIndex(cat)
	}
}

// BenchmarkCatalogue_perQuery is the switches' cost on the query path for
// a kids' client with every service and every safe-search engine on: a
// name of no service (the common case, the whole walk), a service's name,
// and, for comparison, the same client with no switches.
func BenchmarkCatalogue_perQuery(b *testing.B) {
	on := householdCfg(catalog.Services().IDs(), catalog.Engines, nil)
	off := householdCfg(nil, nil, nil)
	for _, bc := range []struct {
		what string
		name string
	}{
		{"off/miss", "www.example.co.uk."},
		{"on/miss", "www.example.co.uk."},
		{"on/service", "v16-webapp.tiktok.com."},
	} {
		cfg := off
		if bc.what != "off/miss" {
			cfg = on
		}
		e := New(Options{})
		e.Update(cfg.Filter)
		s := e.NewStage(cfg, time.UTC)
		ev := &query.Event{Client: netip.MustParseAddr("192.168.1.30"), Name: bc.name, Qtype: dns.TypeA, Qclass: dns.ClassINET, Time: time.Now()}
		b.Run(bc.what, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.Passes(ev, nil)
			}
		})
		e.Close()
	}
}
