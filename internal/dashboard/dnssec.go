package dashboard

import "strings"

// dnssecZone is the zone a DNSSEC bogus verdict named in a query row — the
// EDE text of enforce's SERVFAIL is "ZONE: REASON" (docs/dnssec.md) with an
// EDE code from 6 to 12 — or "" for any other row. The query log offers to
// stop validating it for a day (POST /api/dnssec/nta).
func dnssecZone(q QueryJSON) string {
	if q.EDECode == nil || *q.EDECode < 6 || *q.EDECode > 12 {
		return ""
	}
	zone, _, ok := strings.Cut(q.EDEText, ": ")
	if !ok || !strings.HasSuffix(zone, ".") || strings.ContainsAny(zone, " \t") || zone == "." {
		return ""
	}
	return strings.TrimSuffix(zone, ".")
}
