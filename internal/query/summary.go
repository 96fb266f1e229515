package query

import (
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
		// The presentation form minus its header: "192.0.2.1".
		s := rr.String()
		if hs := h.String(); strings.HasPrefix(s, hs) {
			s = s[len(hs):]
		}
		b.WriteString(s)
	}
	return b.String()
}
