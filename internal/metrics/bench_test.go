package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// BenchmarkGather is one full scrape's Gather with two upstreams and three
// zones: nxdns alone (what this package adds to a scrape), and the registry
// New returns, Go runtime and process collectors included (what a scrape
// costs the Pi).
func BenchmarkGather(b *testing.B) {
	nxdnsOnly := prometheus.NewRegistry()
	nxdnsOnly.MustRegister(nxdnsCollectors(sampleSources())...)
	for _, bc := range []struct {
		name string
		reg  *prometheus.Registry
	}{
		{"nxdns", nxdnsOnly},
		{"full", New(sampleSources())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
