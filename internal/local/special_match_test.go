package local

import "testing"

// The last-label check leaves out only names under no special zone: for
// every zone, a name below it, its last label alone and everyday names,
// match finds what looking up every suffix finds.
func TestMatch_lastLabelCheckFindsWhatTheWalkFinds(t *testing.T) {
	names := []string{".", "com.", "www.example.com.", "net.", "example.net.",
		"use-application-dns.net.", "x.use-application-dns.net.", "arpa.", "in-addr.arpa.",
		"8.8.8.8.in-addr.arpa.", "1.0.0.127.in-addr.arpa.", "nas.home.arpa.", "printer.local.",
		"localhost.", "a.localhost.", "localhost.example.", "onion.example.", "x.onion."}
	for z := range specialZones {
		names = append(names, z, "x."+z, lastLabel(z))
	}
	for _, n := range names {
		wz, wk := walkSuffixes(specialZones, n)
		if z, k := match(specialZones, n); z != wz || k != wk {
			t.Errorf("match(%q) = %q, %d; every suffix looked up finds %q, %d", n, z, k, wz, wk)
		}
	}
	if z, _ := match(specialZones, "x.use-application-dns.net."); z != "use-application-dns.net." {
		t.Errorf("a name below the guard zone matched %q", z)
	}
}

// BenchmarkMatch is the special-name check of a hit's everyday name:
// go test -run - -bench Match ./internal/local/ (and with -cpuprofile).
func BenchmarkMatch(b *testing.B) {
	for _, n := range []string{"www.example.com.", "printer.local.", "1.0.0.127.in-addr.arpa."} {
		b.Run(n, func(b *testing.B) {
			for b.Loop() {
				match(specialZones, n)
			}
		})
	}
}
