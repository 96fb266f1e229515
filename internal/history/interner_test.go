package history

import (
	"fmt"
	"net/netip"
	"testing"
	"unsafe"
)

// TestInterner_sharesRepeatsAndStaysBounded: a repeated string is one copy,
// the copy does not alias the bytes it came from (a bbolt value is valid
// only inside its transaction), and past the bound every string is still
// right while the tables stop growing.
func TestInterner_sharesRepeatsAndStaysBounded(t *testing.T) {
	in := newInterner()
	b := []byte("host1.example.")
	s1, s2 := in.string(b), in.string([]byte("host1.example."))
	if s1 != "host1.example." || unsafe.StringData(s1) != unsafe.StringData(s2) {
		t.Fatalf("repeat not shared: %q %q", s1, s2)
	}
	b[0] = 'X'
	if s1 != "host1.example." {
		t.Fatalf("interned string aliases its source: %q", s1)
	}
	if n := in.name("Host1.Example."); n != "host1.example" {
		t.Fatalf("name %q", n)
	}
	a := netip.MustParseAddr("192.168.1.10")
	if c := in.client(a); c != "192.168.1.10" {
		t.Fatalf("client %q", c)
	}
	for i := range maxInterned + 100 {
		want := fmt.Sprintf("n%d.Flood.", i)
		if got := in.string([]byte(want)); got != want {
			t.Fatalf("string %d: %q", i, got)
		}
		if got := in.name(want); got != normName(want) {
			t.Fatalf("name %d: %q", i, got)
		}
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		if got := in.client(addr); got != addr.String() {
			t.Fatalf("client %d: %q", i, got)
		}
	}
	if len(in.strs) != maxInterned || len(in.names) != maxInterned || len(in.clients) != maxInterned {
		t.Fatalf("tables grew past the bound: %d %d %d", len(in.strs), len(in.names), len(in.clients))
	}
	var none *interner
	if none.string([]byte("x")) != "x" || none.name("A.") != "a" || none.client(a) != "192.168.1.10" {
		t.Fatal("nil interner")
	}
}
