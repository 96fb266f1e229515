package filter

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
)

// TestPolicy_poolFollowsGroupsAndSchedules: a client's pool is its first
// group on now that names upstreams (file order), else default's when it
// names them, else the main pool; a scheduled group's pool follows its
// window, as its lists do (docs/filter.md "Per-group upstreams").
func TestPolicy_poolFollowsGroupsAndSchedules(t *testing.T) {
	loc := berlin(t)
	cfg := kidsCfg
	cfg.Groups = []config.FilterGroup{
		{Name: "default", Lists: []string{"ads"}, Upstreams: []string{"tls://192.0.2.1"}},
		{Name: "games", Clients: []string{"192.168.1.33"}, Lists: []string{"games"}}, // no upstreams
		cfg.Groups[1], // kids: 192.168.1.32/30 and "tablet", weekdays 08–15
	}
	cfg.Groups[2].Upstreams = []string{"tls://192.0.2.3"}
	p := NewPolicy(cfg, []config.Client{{IP: "192.168.1.20", Name: "tablet"}}, kidsBits, loc)
	monday10 := time.Date(2026, 3, 2, 10, 0, 0, 0, loc)
	monday16 := time.Date(2026, 3, 2, 16, 0, 0, 0, loc)
	for _, tc := range []struct {
		client string
		name   string
		at     time.Time
		want   string
	}{
		{"192.168.1.33", "", monday10, "kids"}, // games names no upstreams: the next group's
		{"192.168.1.20", "", monday10, "kids"}, // by [[clients]] name
		{"10.0.0.1", "tablet", monday10, "kids"},
		{"192.168.1.33", "", monday16, "default"}, // outside the window
		{"192.168.1.99", "", monday10, "default"},
	} {
		if got := p.Pool(netip.MustParseAddr(tc.client), tc.name, tc.at); got != tc.want {
			t.Errorf("%s %q at %s: pool %q, want %q", tc.client, tc.name, tc.at.Format("15:04"), got, tc.want)
		}
	}
	cfg.Groups[0].Upstreams = nil
	p = NewPolicy(cfg, nil, kidsBits, loc)
	if got := p.Pool(netip.MustParseAddr("192.168.1.99"), "", monday10); got != "" {
		t.Errorf("a client of no pooled group: pool %q, want the main pool", got)
	}
	if got := NewPolicy(kidsCfg, nil, kidsBits, loc).Pool(netip.MustParseAddr("192.168.1.33"), "", monday10); got != "" {
		t.Errorf("no group names upstreams: pool %q", got)
	}
}
