package filter

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The group switches and the dashboard NTAs replicate as the allowed
// names do (docs/how-to/two-pis.md, "Replication"): each change made
// through the API is told to the hook as one key and value, and applying
// those on a second engine gives it the same switches and NTAs, without
// telling its own hook (a peer's change is not sent back as new). An NTA a
// peer sets past a week ends within a week here; keys and values this
// binary does not know are refused and change nothing.
func TestReplicate_switchesAndNTAsRoundTrip(t *testing.T) {
	cfg := schoolCfg(t)
	var clock atomic.Int64
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	clock.Store(now.UnixNano())
	a, sa, muxA := clockedAPI(t, cfg, &clock)
	b, sb, _ := clockedAPI(t, cfg, &clock)
	type change struct{ key, value string }
	var told []change
	a.OnChange(func(k, v string) { told = append(told, change{k, v}) })
	var echoed []change
	b.OnChange(func(k, v string) { echoed = append(echoed, change{k, v}) })
	for _, path := range []string{
		"/api/filter/groups/switch?group=kids&service=tiktok&state=on",
		"/api/filter/groups/switch?group=kids&service=youtube&state=off",
		"/api/filter/groups/switch?group=kids&safe_search=google&state=on",
		"/api/filter/groups/switch?group=kids&service=youtube&state=config",
		"/api/dnssec/nta?name=Broken.Example.&hours=2",
		"/api/dnssec/nta?name=gone.example&hours=1",
	} {
		w := httptest.NewRecorder()
		muxA.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		if w.Code != 200 {
			t.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
		}
	}
	w := httptest.NewRecorder()
	muxA.ServeHTTP(w, httptest.NewRequest(http.MethodDelete, "/api/dnssec/nta?name=gone.example", nil))
	want := []change{
		{"switch/kids/service/tiktok", "on"},
		{"switch/kids/service/youtube", "off"},
		{"switch/kids/safe_search/google", "on"},
		{"switch/kids/service/youtube", ""},
		{"nta/broken.example", now.Add(2 * time.Hour).Format(time.RFC3339Nano)},
		{"nta/gone.example", now.Add(time.Hour).Format(time.RFC3339Nano)},
		{"nta/gone.example", ""},
	}
	if !slices.Equal(told, want) {
		t.Fatalf("changes told:\n%v\nwant\n%v", told, want)
	}
	for _, c := range told {
		if !b.ApplyReplicated(c.key, c.value) {
			t.Errorf("ApplyReplicated(%q, %q) refused", c.key, c.value)
		}
	}
	if len(echoed) != 0 {
		t.Errorf("applying a peer's changes told the hook again: %v", echoed)
	}
	if ga, gb := a.Groups(sa), b.Groups(sb); !slices.EqualFunc(ga, gb, func(x, y GroupSwitches) bool {
		return slices.Equal(x.Services, y.Services) && slices.Equal(x.SafeSearch, y.SafeSearch)
	}) {
		t.Errorf("switches differ: here %+v, the peer %+v", ga, gb)
	}
	if !b.SwitchOn(sb, "kids", SwitchService, "tiktok") || !b.SwitchOn(sb, "kids", SwitchSafeSearch, "google") {
		t.Error("the peer's kids group lacks tiktok blocked or google's safe search")
	}
	if !slices.EqualFunc(a.NTAs(), b.NTAs(), func(x, y NTA) bool { return x.Name == y.Name && x.Until.Equal(y.Until) }) || !b.NTAActive("www.broken.example.") || b.NTAActive("gone.example") {
		t.Errorf("NTAs: here %v, the peer %v", a.NTAs(), b.NTAs())
	}

	if !b.ApplyReplicated("nta/ahead.example", now.AddDate(1, 0, 0).Format(time.RFC3339Nano)) {
		t.Fatal("an NTA a year ahead was refused rather than bounded")
	}
	if n := b.NTAs(); !slices.ContainsFunc(n, func(x NTA) bool { return x.Name == "ahead.example" && !x.Until.After(now.Add(MaxNTADuration)) }) {
		t.Errorf("an NTA a year ahead: %v, want it to end within %v", n, MaxNTADuration)
	}
	before := b.Groups(sb)
	for _, kv := range []change{
		{"switch/kids/service/nosuchservice", "on"},
		{"switch/kids/service/tiktok", "maybe"},
		{"switch/kids/brightness/tiktok", "on"},
		{"switch/tiktok", "on"},
		{"nta/Not..A..Name", "2026-12-03T12:00:00Z"},
		{"nta/x.example", "tomorrow"},
	} {
		if b.ApplyReplicated(kv.key, kv.value) {
			t.Errorf("ApplyReplicated(%q, %q) accepted", kv.key, kv.value)
		}
	}
	if !slices.EqualFunc(before, b.Groups(sb), func(x, y GroupSwitches) bool { return slices.Equal(x.Services, y.Services) }) {
		t.Error("refused keys changed the switches")
	}
}
