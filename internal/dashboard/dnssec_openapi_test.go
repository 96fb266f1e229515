package dashboard

import (
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/filter"
)

// DNSSEC validation's routes (docs/dnssec.md): the negative trust anchors
// the filter engine keeps (internal/filter nta.go, documented with the
// filter's routes) and the bogus verdicts the App counts (internal/app
// dnssec.go).
func init() {
	for r, d := range map[string]struct {
		summary string
		params  [][2]string
		body    any
	}{
		"GET /api/dnssec/nta": {"The DNSSEC negative trust anchors set from the dashboard that are still running, with their end.", nil, []filter.NTA{}},
		"POST /api/dnssec/nta": {"Stops DNSSEC validation of a name and the names below it for a while (RFC 7646), kept in filter.state_dir across restarts; it ends by itself.",
			[][2]string{{"name", "The domain name. Required."}, {"hours", "How long, in hours: more than 0, at most 168 (a week); absent: 24."}, {"minutes", "How long, in minutes, instead of hours (the dashboard's buttons)."}}, filter.NTAAnswer{}},
		"DELETE /api/dnssec/nta": {"Ends a negative trust anchor set from the dashboard.",
			[][2]string{{"name", "The domain name. Required."}}, filter.NTAAnswer{}},
	} {
		filterDocs[r] = d
	}
}

// dnssecDocs document the App's DNSSEC routes, as cacheDocs the cache's.
var dnssecDocs = map[string]struct {
	summary string
	body    any
}{
	"GET /api/dnssec/bogus": {"The last 50 bogus DNSSEC verdicts since start, oldest first: the name asked, the zone and the reason, the EDE, and whether the answer was SERVFAIL (enforce) or given (shadow).", []dnssec.Episode{}},
}
