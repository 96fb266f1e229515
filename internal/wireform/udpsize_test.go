package wireform

import (
	"bytes"
	"testing"

	"github.com/miekg/dns"
)

// SetUDPSize changes the OPT record's UDP size of a padded query and
// nothing else; a message whose last record is not an OPT is left alone.
func TestSetUDPSize_changesOnlyTheOPTSize(t *testing.T) {
	q := query("www.example.com.", dns.TypeA)
	q.SetEdns0(1232, true)
	wire, ok := Pad(pack(t, q), QueryBlock, 0xFFFF)
	if !ok {
		t.Fatal("Pad refused the query")
	}
	if !SetUDPSize(wire, 65535) {
		t.Fatal("SetUDPSize refused a query with an OPT record last")
	}
	m := mustUnpack(t, wire)
	o := m.IsEdns0()
	if o == nil || o.UDPSize() != 65535 || !o.Do() || len(o.Option) != 1 {
		t.Fatalf("OPT %v, want size 65535, DO and the padding kept", o)
	}
	if m.Question[0] != q.Question[0] || m.Id != q.Id {
		t.Fatalf("message %v, want %v with only the size changed", m, q)
	}

	plain := pack(t, query("www.example.com.", dns.TypeA))
	before := bytes.Clone(plain)
	if SetUDPSize(plain, 65535) || !bytes.Equal(plain, before) {
		t.Fatal("SetUDPSize changed a message without an OPT record")
	}
}
