package filter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
)

// schoolCfg is the shipped example's shape (docs/examples/nxdns.toml): the
// default group has the ad list, the kids' group adds the family list on
// school days.
func schoolCfg(t *testing.T) config.Config {
	t.Helper()
	dir := t.TempDir()
	f := config.FilterDefaults()
	f.Lists = []config.FilterList{
		{Name: "ads", Path: writeList(t, dir, "ads.txt", "0.0.0.0 ads.example\n")},
		{Name: "family", Path: writeList(t, dir, "family.txt", "||games.example^\n")},
	}
	f.Groups = []config.FilterGroup{
		{Name: "default", Lists: []string{"ads"}},
		{Name: "kids", Clients: []string{"192.168.1.30"}, Lists: []string{"family"},
			Schedule: []config.Window{{Days: []string{"mon", "tue", "wed", "thu", "fri"}, From: "07:00", To: "20:00"}}},
	}
	return config.Config{Filter: f}
}

// TestStage_scheduledGroupFallsBackToDefault: outside the kids' window the
// tablet keeps the default group's list (it is never unfiltered), inside
// it gets the family list on top; the switch is followed both ways on a
// fake clock (docs/filter.md "Groups, schedules, pause").
func TestStage_scheduledGroupFallsBackToDefault(t *testing.T) {
	cfg := schoolCfg(t)
	var clock atomic.Int64
	set := func(d time.Time) { clock.Store(d.UnixNano()) }
	e := New(Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	t.Cleanup(e.Close)
	e.Update(cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	blocked := func(name string) bool {
		_, ev := ask(t, s, &next{}, "192.168.1.30", name, dns.TypeA)
		return ev.Filter.Blocked
	}
	thursday := func(h, m int) time.Time { return time.Date(2026, 12, 3, h, m, 0, 0, time.UTC) }
	for _, step := range []struct {
		at          time.Time
		ads, family bool
		what        string
	}{
		{thursday(6, 31), true, false, "06:31, before the window"},
		{thursday(7, 0), true, true, "07:00, the window opens"},
		{thursday(19, 59), true, true, "19:59, inside"},
		{thursday(20, 0), true, false, "20:00, the window closed"},
		{time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC), true, false, "Saturday"},
		{thursday(12, 0), true, true, "back inside (the clock set back)"},
	} {
		set(step.at)
		if got := blocked("ads.example."); got != step.ads {
			t.Errorf("%s: ads.example blocked %v, want %v", step.what, got, step.ads)
		}
		if got := blocked("games.example."); got != step.family {
			t.Errorf("%s: games.example blocked %v, want %v", step.what, got, step.family)
		}
	}
	// A client in no group is filtered by default all the while.
	set(thursday(12, 0))
	if _, ev := ask(t, s, &next{}, "192.168.1.99", "games.example.", dns.TypeA); ev.Filter.Blocked {
		t.Error("a client outside the kids' group got the family list")
	}
}

// TestStage_decisionNamesTheGroupOfTheList: the query event and the check
// endpoint name the group whose list decided, not the client's first group.
func TestStage_decisionNamesTheGroupOfTheList(t *testing.T) {
	cfg := schoolCfg(t)
	cfg.Filter.Groups[1].Schedule = nil
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	for _, tc := range []struct{ name, list, group string }{
		{"games.example.", "family", "kids"},
		{"ads.example.", "ads", "default"},
	} {
		_, ev := ask(t, s, &next{}, "192.168.1.30", tc.name, dns.TypeA)
		if !ev.Filter.Blocked || ev.Filter.List != tc.list || ev.Filter.Group != tc.group {
			t.Errorf("%s: event %+v, want list %s group %s", tc.name, ev.Filter, tc.list, tc.group)
		}
		d := s.Check(tc.name, ev.Client, "", time.Now())
		if d.Group != tc.group || !strings.Contains(d.Explanation, "of group "+tc.group) {
			t.Errorf("%s: check says group %q: %s", tc.name, d.Group, d.Explanation)
		}
	}
}

// TestAPI_pauseOfAnUnknownClientNameIs404: a name no [[clients]] entry
// has pauses nobody, so the API says so instead of reporting success;
// addresses and known names are paused as before.
func TestAPI_pauseOfAnUnknownClientNameIs404(t *testing.T) {
	cfg := schoolCfg(t)
	cfg.Clients = []config.Client{{Name: "tablet", IP: "192.168.1.30"}}
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	mux := http.NewServeMux()
	for _, r := range e.Routes(func() *Stage { return s }) {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(path string) (int, string) {
		resp, err := srv.Client().Post(srv.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/api/filter/pause?minutes=5&client=tablett", "/api/filter/resume?client=tablett"} {
		code, body := post(path)
		if code != http.StatusNotFound || !strings.Contains(body, `\"tablett\" is neither an IP address nor a [[clients]] name`) {
			t.Errorf("%s: %d %s, want 404 with the reason", path, code, body)
		}
	}
	if _, paused := e.pauses.paused(netip.MustParseAddr("10.0.0.1"), "tablett", time.Now()); paused {
		t.Error("the unknown name was paused anyway")
	}
	for _, path := range []string{"/api/filter/pause?minutes=5&client=tablet", "/api/filter/pause?minutes=5&client=192.168.1.77", "/api/filter/resume?client=tablet"} {
		if code, body := post(path); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
}

// TestAPI_groupPauseUnfiltersTheGroupsClientsUntilItEnds: pause with
// group=kids unfilters the kids' tablet (every list, the default group's
// too) and nobody else, ends by itself at its time, and resume ends it
// early; an unknown group is 404, group with client 400.
func TestAPI_groupPauseUnfiltersTheGroupsClientsUntilItEnds(t *testing.T) {
	cfg := schoolCfg(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC).UnixNano())
	e, s, mux := clockedAPI(t, cfg, &clock)
	post := func(path string) (int, string) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest("POST", path, nil))
		return w.Code, w.Body.String()
	}
	blocked := func(client, name string) bool {
		_, ev := ask(t, s, &next{}, client, name, dns.TypeA)
		return ev.Filter.Blocked
	}
	if !blocked("192.168.1.30", "games.example") || !blocked("192.168.1.30", "ads.example") {
		t.Fatal("the tablet is not filtered before the pause")
	}
	if code, body := post("/api/filter/pause?minutes=30&group=kids"); code != 200 || !strings.Contains(body, `"group":"kids"`) {
		t.Fatalf("pause group=kids: %d %s", code, body)
	}
	if blocked("192.168.1.30", "games.example") || blocked("192.168.1.30", "ads.example") {
		t.Error("the kids' tablet is still filtered during the group's pause")
	}
	if !blocked("192.168.1.40", "ads.example") {
		t.Error("a client outside the group was unfiltered")
	}
	if until, ok := e.GroupPaused("kids"); !ok || until.Sub(time.Unix(0, clock.Load())) != 30*time.Minute {
		t.Errorf("GroupPaused: %v %v", until, ok)
	}
	clock.Add(int64(31 * time.Minute))
	if !blocked("192.168.1.30", "games.example") {
		t.Error("the group's pause did not end by itself")
	}
	post("/api/filter/pause?minutes=30&group=kids")
	if code, _ := post("/api/filter/resume?group=kids"); code != 200 || !blocked("192.168.1.30", "games.example") {
		t.Error("resume group=kids did not end the pause")
	}
	if code, body := post("/api/filter/pause?minutes=5&group=teens"); code != 404 || !strings.Contains(body, "not a [[filter.groups]] name") {
		t.Errorf("unknown group: %d %s", code, body)
	}
	if code, _ := post("/api/filter/pause?minutes=5&group=kids&client=1.2.3.4"); code != 400 {
		t.Errorf("group and client: %d, want 400", code)
	}
}

// A pause a peer replicates is bounded as a pause made here is, to a week
// from this node's clock (docs/filter.md, "Replication"): a peer whose
// clock runs a year ahead, or whose state was edited, cannot leave
// filtering off here for a year. A pause that ended by this node's clock
// has ended; one within the week keeps its end.
func TestReplicate_pauseFromAPeerEndsWithinAWeek(t *testing.T) {
	cfg := schoolCfg(t)
	var clock atomic.Int64
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	clock.Store(now.UnixNano())
	e, _, _ := clockedAPI(t, cfg, &clock)
	week := time.Duration(maxPauseMinutes) * time.Minute
	if !e.ApplyReplicated("pause/group/kids", now.AddDate(1, 0, 0).Format(time.RFC3339Nano)) {
		t.Fatal("a replicated group pause was not applied")
	}
	if until, ok := e.GroupPaused("kids"); !ok || until.After(now.Add(week)) {
		t.Errorf("group pause a year ahead: until %v (%v), want paused until at most %v", until, ok, now.Add(week))
	}
	e.ApplyReplicated("pause/all", now.AddDate(1, 0, 0).Format(time.RFC3339Nano))
	if until, ok := e.PausedUntil(); !ok || until.After(now.Add(week)) {
		t.Errorf("pause for all a year ahead: until %v (%v), want at most %v", until, ok, now.Add(week))
	}
	e.ApplyReplicated("pause/group/kids", now.Add(time.Hour).Format(time.RFC3339Nano))
	if until, ok := e.GroupPaused("kids"); !ok || !until.Equal(now.Add(time.Hour)) {
		t.Errorf("an hour's pause: until %v (%v), want %v", until, ok, now.Add(time.Hour))
	}
	clock.Add(int64(week + time.Hour))
	if _, ok := e.PausedUntil(); ok {
		t.Error("the replicated pause for all still runs past a week")
	}
}
