package config

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkLoad_example measures a whole load of the shipped example: the
// cost paid at start-up, on every reload and per `nxdns check`.
func BenchmarkLoad_example(b *testing.B) {
	doc, err := os.ReadFile(exampleFile)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(bytes.NewReader(doc)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate_maxUpstreams validates the largest accepted pool.
func BenchmarkValidate_maxUpstreams(b *testing.B) {
	c := valid()
	c.Upstreams = upstreams(MaxUpstreams, 0)
	b.ReportAllocs()
	for b.Loop() {
		if ps := Validate(c); len(ps) != 0 {
			b.Fatal(ps)
		}
	}
}
