package query

import (
	"strconv"
	"testing"

	"github.com/miekg/dns"
)

// TestSummary_largeRecordIsNamedBySize: a record whose text miekg/dns
// builds in quadratic time (an NSEC bitmap of every type) is summarised by
// its size, not rendered.
func TestSummary_largeRecordIsNamedBySize(t *testing.T) {
	nsec := &dns.NSEC{Hdr: dns.RR_Header{Name: "a.example.", Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: 60}, NextDomain: "b.example."}
	for ty := uint16(1); ty < 16384; ty++ {
		nsec.TypeBitMap = append(nsec.TypeBitMap, ty)
	}
	m := new(dns.Msg)
	m.Answer = []dns.RR{nsec}
	got := Summary(m)
	want := "NSEC (" + strconv.Itoa(dns.Len(nsec)) + " bytes)"
	if got != want {
		t.Fatalf("Summary = %.80q, want %q", got, want)
	}
}
