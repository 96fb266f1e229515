package dashboard

import (
	"testing"

	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/query"
)

// TestWhy_switchRows: a history row a group's switch decided reads back as
// the service or the safe-search rewrite, with the group.
func TestWhy_switchRows(t *testing.T) {
	for _, tc := range []struct {
		d    query.Decision
		want string
	}{
		{query.Decision{Blocked: true, List: "service:tiktok", Rule: "||tiktok.com^", Group: "kids"},
			"blocked service: tiktok (domain ||tiktok.com^) for group kids"},
		{query.Decision{List: "safe-search", Rule: "google → forcesafesearch.google.com", Group: "kids"},
			"safe search: google → forcesafesearch.google.com for group kids"},
	} {
		if got := Why(history.Row{Source: query.SourceBlocked, Filter: tc.d}); got != tc.want {
			t.Errorf("Why = %q, want %q", got, tc.want)
		}
	}
}
