package filter

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
)

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatalf("tzdata: %v", err)
	}
	return loc
}

var kidsCfg = config.Filter{
	Lists: []config.FilterList{{Name: "ads", Path: "/x"}, {Name: "games", Path: "/y"}},
	Groups: []config.FilterGroup{
		{Name: "default", Lists: []string{"ads"}},
		{Name: "kids", Clients: []string{"tablet", "192.168.1.32/30"}, Lists: []string{"ads", "games"},
			Schedule: []config.Window{{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "08:00", To: "15:00"},
				{Days: []string{"sat", "sun"}, From: "21:00", To: "07:00"}}},
	},
}

var kidsBits = map[string]int{"ads": 0, "games": 1}

func TestPolicy_groupsApplyToTheirClientsOnly(t *testing.T) {
	loc := berlin(t)
	p := NewPolicy(kidsCfg, []config.Client{{IP: "192.168.1.20", Name: "tablet"}}, kidsBits, loc)
	monday10 := time.Date(2026, 3, 2, 10, 0, 0, 0, loc)
	for _, tc := range []struct {
		client string
		name   string
		want   uint64
		group  string
	}{
		{"192.168.1.20", "", 0b11, "kids"},        // by [[clients]] name
		{"192.168.1.33", "", 0b11, "kids"},        // by CIDR
		{"::ffff:192.168.1.33", "", 0b11, "kids"}, // mapped form
		{"192.168.1.99", "", 0b01, "default"},
		{"10.0.0.1", "tablet", 0b11, "kids"}, // by the event's client name
	} {
		mask, group := p.Lists(netip.MustParseAddr(tc.client), tc.name, monday10)
		if mask != tc.want|1<<inlineBit || group != tc.group {
			t.Errorf("%s: mask %b group %q, want %b %q", tc.client, mask&^(1<<inlineBit), group, tc.want, tc.group)
		}
	}
}

func TestPolicy_scheduleWindows(t *testing.T) {
	loc := berlin(t)
	p := NewPolicy(kidsCfg, nil, kidsBits, loc)
	kid := netip.MustParseAddr("192.168.1.33")
	at := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, loc) }
	for _, tc := range []struct {
		when time.Time
		on   bool
	}{
		{at(2026, 3, 2, 7, 59), false}, // Monday before school
		{at(2026, 3, 2, 8, 0), true},
		{at(2026, 3, 2, 14, 59), true},
		{at(2026, 3, 2, 15, 0), false},
		{at(2026, 3, 7, 10, 0), false}, // Saturday morning
		{at(2026, 3, 7, 21, 0), true},  // Saturday night
		{at(2026, 3, 8, 6, 59), true},  // past midnight into Sunday
		{at(2026, 3, 9, 6, 59), true},  // Sunday's window runs into Monday morning
		{at(2026, 3, 9, 7, 0), false},
	} {
		mask, _ := p.Lists(kid, "", tc.when.UTC()) // the caller's clock is UTC; the policy reads local time
		if got := mask&(1<<1) != 0; got != tc.on {
			t.Errorf("%s: games applies %v, want %v", tc.when.Format(time.RFC1123), got, tc.on)
		}
	}
}

// TestPolicy_scheduleOnDSTSwitchDays: Europe/Berlin springs forward on
// 2026-03-29 (02:00 → 03:00) and falls back on 2026-10-25 (03:00 → 02:00);
// a window keeps its local times on both days.
func TestPolicy_scheduleOnDSTSwitchDays(t *testing.T) {
	loc := berlin(t)
	cfg := config.Filter{
		Lists:  []config.FilterList{{Name: "ads", Path: "/x"}},
		Groups: []config.FilterGroup{{Name: "default", Lists: []string{"ads"}, Schedule: []config.Window{{From: "08:00", To: "09:00"}, {From: "02:30", To: "03:30"}}}},
	}
	p := NewPolicy(cfg, nil, map[string]int{"ads": 0}, loc)
	c := netip.MustParseAddr("192.168.1.5")
	on := func(u time.Time) bool { m, _ := p.Lists(c, "", u); return m&1 != 0 }
	// Spring: 08:00 local is 06:00 UTC (CEST, +2), where the day before it was 07:00 UTC.
	if !on(time.Date(2026, 3, 29, 6, 0, 0, 0, time.UTC)) || on(time.Date(2026, 3, 29, 5, 59, 0, 0, time.UTC)) {
		t.Error("spring-forward day: the 08:00 window does not start at 06:00 UTC")
	}
	if !on(time.Date(2026, 3, 28, 7, 0, 0, 0, time.UTC)) || on(time.Date(2026, 3, 28, 6, 30, 0, 0, time.UTC)) {
		t.Error("the day before: the 08:00 window does not start at 07:00 UTC")
	}
	// 02:30–03:30 on the spring day: 02:xx does not exist; 03:00–03:30 CEST is 01:00–01:30 UTC.
	if !on(time.Date(2026, 3, 29, 1, 15, 0, 0, time.UTC)) || on(time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)) {
		t.Error("spring-forward day: the window over the gap is not 03:00–03:30 local")
	}
	// Autumn: 08:00 local is 07:00 UTC again (CET, +1).
	if !on(time.Date(2026, 10, 25, 7, 0, 0, 0, time.UTC)) || on(time.Date(2026, 10, 25, 6, 59, 0, 0, time.UTC)) {
		t.Error("fall-back day: the 08:00 window does not start at 07:00 UTC")
	}
	// 02:30–03:30 on the autumn day: 02:30 happens twice (00:30 UTC in CEST
	// and 01:30 UTC in CET); the window is on during both.
	for _, u := range []time.Time{time.Date(2026, 10, 25, 0, 45, 0, 0, time.UTC), time.Date(2026, 10, 25, 1, 45, 0, 0, time.UTC), time.Date(2026, 10, 25, 2, 15, 0, 0, time.UTC)} {
		if !on(u) {
			t.Errorf("fall-back day: %s (%s local) is outside 02:30–03:30", u.Format("15:04Z"), u.In(loc).Format("15:04 MST"))
		}
	}
	if on(time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC)) { // 03:30 CET
		t.Error("fall-back day: 03:30 local is still inside")
	}
}

func TestPolicy_noGroupsMeansEveryList(t *testing.T) {
	cfg := config.Filter{Lists: []config.FilterList{{Name: "a", Path: "/a"}, {Name: "b", Path: "/b"}}}
	p := NewPolicy(cfg, nil, map[string]int{"a": 0, "b": 1}, time.UTC)
	if m, g := p.Lists(netip.MustParseAddr("10.0.0.1"), "", time.Now()); m != 0b11|1<<inlineBit || g != "" {
		t.Errorf("mask %b group %q", m, g)
	}
	// Groups but no default: a client in none gets every list.
	cfg.Groups = []config.FilterGroup{{Name: "kids", Clients: []string{"10.0.0.9"}, Lists: []string{"a"}}}
	p = NewPolicy(cfg, nil, map[string]int{"a": 0, "b": 1}, time.UTC)
	if m, _ := p.Lists(netip.MustParseAddr("10.0.0.1"), "", time.Now()); m != 0b11|1<<inlineBit {
		t.Errorf("no default group: mask %b", m)
	}
}

func TestPauses_expireByThemselves(t *testing.T) {
	var p pauses
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	c := netip.MustParseAddr("192.168.1.5")
	p.pause("192.168.1.5", now.Add(5*time.Minute))
	if _, ok := p.paused(c, "", now.Add(4*time.Minute)); !ok {
		t.Error("not paused inside the pause")
	}
	if _, ok := p.paused(netip.MustParseAddr("192.168.1.6"), "", now); ok {
		t.Error("another client is paused")
	}
	if _, ok := p.paused(c, "", now.Add(5*time.Minute)); ok {
		t.Error("still paused when it has expired")
	}
	p.pause("", now.Add(time.Minute))
	if _, ok := p.paused(netip.MustParseAddr("10.0.0.1"), "", now); !ok {
		t.Error("a global pause does not cover everyone")
	}
	p.resume("")
	if _, ok := p.paused(c, "", now); ok {
		t.Error("resume left a pause")
	}
	p.pause("tablet", now.Add(time.Minute))
	if _, ok := p.paused(netip.MustParseAddr("10.9.9.9"), "tablet", now); !ok {
		t.Error("a pause by client name does not match the event's name")
	}
}

// TestPauses_concurrent: the query path reads while the API writes (-race).
func TestPauses_concurrent(t *testing.T) {
	var p pauses
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			p.pause("192.168.1.5", time.Now().Add(time.Duration(i)*time.Second))
			p.resume("192.168.1.6")
		}
	}()
	c := netip.MustParseAddr("192.168.1.5")
	for range 1000 {
		p.paused(c, "x", time.Now())
	}
	<-done
}
