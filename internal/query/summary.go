package query

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// summaryRecords bounds how many answer records Summary names: enough to
// see a CNAME chain's end or a round-robin pair, short enough for one log
// line.
const summaryRecords = 3

// Summary is a short, human description of an answer's records for the
// query log and the history: "CNAME cdn.example.net., A 192.0.2.1 (+2)",
// "NODATA" for an empty NOERROR answer, "" when there is nothing to say (an
// error rcode, no answer). It never includes the additional section.
func Summary(m *dns.Msg) string {
	if m == nil || m.Rcode != dns.RcodeSuccess {
		return ""
	}
	if len(m.Answer) == 0 {
		return "NODATA"
	}
	var b strings.Builder
	for i, rr := range m.Answer {
		if i == summaryRecords {
			b.WriteString(" (+")
			b.WriteString(strconv.Itoa(len(m.Answer) - summaryRecords))
			b.WriteByte(')')
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		h := rr.Header()
		b.WriteString(dns.Type(h.Rrtype).String())
		b.WriteByte(' ')
		b.WriteString(rdata(rr))
	}
	return b.String()
}

// summaryRdataMax bounds the record data Summary writes out: miekg/dns
// builds some records' text by repeated concatenation (NSEC type bitmaps,
// HIP and NINFO name lists), so its cost grows with the square of the
// record's size — seconds for one hostile record, paid at every log line
// and every rendering of a cached answer. A record past the bound is named
// by its size instead, which is all a log line can show of it anyway.
const summaryRdataMax = 512

// rdata is rr's presentation form minus its header: "192.0.2.1". The
// records most answers consist of are written directly: rr.String() builds
// the whole line, header included, and would be most of a query-log line's
// cost at cache-hit rates. Anything else, and any name that would need
// escaping, takes rr.String(), so the text is the same either way
// (TestRdataMatchesString).
func rdata(rr dns.RR) string {
	switch r := rr.(type) {
	case *dns.A:
		if ip, ok := netip.AddrFromSlice(r.A); ok && ip.Unmap().Is4() {
			return ip.Unmap().String()
		}
	case *dns.CNAME:
		if plainName(r.Target) {
			return r.Target
		}
	}
	if n := dns.Len(rr); n > summaryRdataMax {
		return "(" + strconv.Itoa(n) + " bytes)"
	}
	s := rr.String()
	if hs := rr.Header().String(); strings.HasPrefix(s, hs) {
		s = s[len(hs):]
	}
	return s
}

// plainName reports whether a name's presentation form is the name itself:
// letters, digits, hyphens, underscores and the dots between labels.
func plainName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
