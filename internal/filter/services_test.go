package filter

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// householdCfg is a household with one kids' group: the tablet at .30, with
// services and safe search as given, on school nights when scheduled.
func householdCfg(services []string, safe []string, schedule []config.Window) config.Config {
	f := config.FilterDefaults()
	f.Groups = []config.FilterGroup{
		{Name: "default"},
		{Name: "kids", Clients: []string{"192.168.1.30"}, Services: services, SafeSearch: safe, Schedule: schedule},
	}
	return config.Config{Filter: f}
}

// api serves the engine's routes over s on loopback.
func api(t *testing.T, e *Engine, s func() *Stage) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for _, r := range e.Routes(s) {
		mux.Handle(r.Pattern, r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, srv *httptest.Server, method, path string, into any) int {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

// TestCheck_everyCatalogueServiceIsBlockedForItsGroup is the table test
// over the whole catalogue: with every service on for the kids, each
// domain of each service, and a name below it, is "blocked service: NAME
// (group kids)" through GET /api/filter/check, and the same names pass for
// a client outside the group.
func TestCheck_everyCatalogueServiceIsBlockedForItsGroup(t *testing.T) {
	cat := catalog.Services()
	cfg := householdCfg(cat.IDs(), nil, nil)
	full := config.Default()
	full.Filter = cfg.Filter
	if ps := config.Validate(full); len(ps) > 0 {
		t.Fatal(ps)
	}
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	srv := api(t, e, func() *Stage { return s })
	var answer ServicesAnswer
	if code := call(t, srv, "GET", "/api/filter/services", &answer); code != 200 || answer.Version != cat.Version || len(answer.Services) != len(cat.Services) {
		t.Fatalf("GET /api/filter/services: %d, version %q, %d services", code, answer.Version, len(answer.Services))
	}
	// Which services have a domain: a domain shared by two services is
	// reported as the first's.
	owner := map[string]string{}
	for _, svc := range cat.Services {
		for _, d := range svc.Domains {
			if _, ok := owner[d]; !ok {
				owner[d] = svc.ID
			}
		}
	}
	for _, svc := range cat.Services {
		t.Run(svc.ID, func(t *testing.T) {
			for _, d := range svc.Domains {
				for _, name := range []string{d, "deep.below." + d} {
					var got Decision
					call(t, srv, "GET", "/api/filter/check?client=192.168.1.30&name="+url.QueryEscape(name), &got)
					want, _ := cat.Lookup(owner[d])
					if !got.Blocked || got.ServiceID != want.ID || got.Group != "kids" ||
						!strings.Contains(got.Explanation, "blocked service: "+want.Name+" (group kids)") {
						t.Errorf("%s: %+v, want blocked service %s of group kids", name, got, want.ID)
					}
					var other Decision
					call(t, srv, "GET", "/api/filter/check?client=192.168.1.99&name="+url.QueryEscape(name), &other)
					if other.Blocked || other.Service != "" {
						t.Errorf("%s: blocked for a client outside the group: %+v", name, other)
					}
				}
			}
		})
	}
	// A name that only ends like a service's domain is not it.
	var got Decision
	call(t, srv, "GET", "/api/filter/check?client=192.168.1.30&name=notyoutube.com", &got)
	if got.Blocked {
		t.Errorf("notyoutube.com blocked: %+v", got)
	}
}

// TestStage_kidsYouTubeOnSchoolNightsFollowsTheClock: YouTube blocked for
// the kids' group on school nights (Sunday to Thursday, 20:00 to 07:00),
// switched both ways on a fake clock; the event names the service and the
// group, EDE 15 the service; outside the window the query goes on.
func TestStage_kidsYouTubeOnSchoolNightsFollowsTheClock(t *testing.T) {
	cfg := householdCfg([]string{"youtube"}, nil, []config.Window{{Days: []string{"sun", "mon", "tue", "wed", "thu"}, From: "20:00", To: "07:00"}})
	var clock atomic.Int64
	set := func(d time.Time) { clock.Store(d.UnixNano()) }
	e := New(Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	t.Cleanup(e.Close)
	e.Update(cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	at := func(day, h, m int) time.Time { return time.Date(2026, 12, day, h, m, 0, 0, time.UTC) } // 3 Dec 2026: a Thursday
	for _, step := range []struct {
		at      time.Time
		blocked bool
		what    string
	}{
		{at(3, 19, 59), false, "Thursday 19:59"},
		{at(3, 20, 0), true, "Thursday 20:00, the window opens"},
		{at(4, 6, 59), true, "Friday 06:59, the night runs on"},
		{at(4, 7, 0), false, "Friday 07:00, over"},
		{at(4, 21, 0), false, "Friday night: no school tomorrow"},
		{at(6, 22, 0), true, "Sunday 22:00"},
	} {
		set(step.at)
		n := &next{}
		resp, ev := ask(t, s, n, "192.168.1.30", "www.youtube.com.", dns.TypeA)
		if step.blocked {
			if !ev.Filter.Blocked || ev.Filter.Service != "YouTube" || ev.Filter.Group != "kids" || n.got != 0 {
				t.Errorf("%s: event %+v, forwarded %d: want blocked service YouTube of group kids", step.what, ev.Filter, n.got)
			}
			if x := ede(resp); x == nil || x.InfoCode != dns.ExtendedErrorCodeBlocked || x.ExtraText != "service YouTube" {
				t.Errorf("%s: EDE %+v", step.what, x)
			}
		} else if ev.Filter.Blocked || n.got != 1 {
			t.Errorf("%s: event %+v, forwarded %d: want it passed on", step.what, ev.Filter, n.got)
		}
		// The fast path asks Passes: it must agree.
		ev2 := *ev
		ev2.Name, ev2.Qclass, ev2.Time = "www.youtube.com.", dns.ClassINET, time.Time{}
		if s.Passes(&ev2, nil) == step.blocked {
			t.Errorf("%s: Passes disagrees with Answer", step.what)
		}
	}
	// Another client, on the same Thursday night, is untouched.
	set(at(3, 22, 0))
	if _, ev := ask(t, s, &next{}, "192.168.1.99", "www.youtube.com.", dns.TypeA); ev.Filter.Blocked {
		t.Error("a client outside the kids' group lost YouTube")
	}
}

// TestStage_serviceBehindACNAMEIsBlocked: a name whose answer's CNAME
// chain reaches a blocked service's domain is blocked too.
func TestStage_serviceBehindACNAMEIsBlocked(t *testing.T) {
	cfg := householdCfg([]string{"tiktok"}, nil, nil)
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	_, ev := ask(t, s, &next{cname: "v16.tiktokcdn.com."}, "192.168.1.30", "video.example.", dns.TypeA)
	if !ev.Filter.Blocked || ev.Filter.Service != "TikTok" {
		t.Errorf("event %+v: want the CNAME to TikTok's CDN blocked", ev.Filter)
	}
}

// TestStage_listAllowRuleWinsOverAService: an allowlist entry wins over a
// blocked service, as it wins over every block rule (docs/filter.md).
func TestStage_listAllowRuleWinsOverAService(t *testing.T) {
	cfg := householdCfg([]string{"youtube"}, nil, nil)
	cfg.Filter.Allow = []string{"||youtubei.googleapis.com^"}
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	if _, ev := ask(t, s, &next{}, "192.168.1.30", "youtubei.googleapis.com.", dns.TypeA); ev.Filter.Blocked {
		t.Errorf("the allowed name was blocked: %+v", ev.Filter)
	}
	if _, ev := ask(t, s, &next{}, "192.168.1.30", "www.youtube.com.", dns.TypeA); !ev.Filter.Blocked {
		t.Errorf("the rest of YouTube was not blocked")
	}
}

// TestSwitches_dashboardTurnsAServiceOnAndOffAndItSurvivesARestart: the
// API's switch is a layer over the configuration: on for a service the
// group does not have, off for one it has, back to the configuration;
// kept in filter.state_dir, read again by a new engine; bad requests are
// refused with the reason.
func TestSwitches_dashboardTurnsAServiceOnAndOffAndItSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	cfg := householdCfg([]string{"youtube"}, nil, nil)
	cfg.Filter.StateDir = dir
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	srv := api(t, e, func() *Stage { return s })
	blocked := func(s *Stage, name string) bool {
		_, ev := ask(t, s, &next{}, "192.168.1.30", name, dns.TypeA)
		return ev.Filter.Blocked
	}
	if blocked(s, "www.tiktok.com.") || !blocked(s, "www.youtube.com.") {
		t.Fatal("the configuration is not in force")
	}
	var a SwitchAnswer
	for _, path := range []string{"/api/filter/groups/switch?group=kids&service=tiktok&state=on",
		"/api/filter/groups/switch?group=kids&service=youtube&state=off",
		"/api/filter/groups/switch?group=kids&safe_search=google&state=on"} {
		if code := call(t, srv, "POST", path, &a); code != 200 || !a.Changed || a.SaveError != "" {
			t.Fatalf("%s: %d %+v", path, code, a)
		}
	}
	if !blocked(s, "www.tiktok.com.") || blocked(s, "www.youtube.com.") {
		t.Fatal("the switches did not apply")
	}
	var groups []GroupSwitches
	call(t, srv, "GET", "/api/filter/groups", &groups)
	if len(groups) != 2 || strings.Join(groups[1].Services, ",") != "tiktok" || strings.Join(groups[1].Configured.Services, ",") != "youtube" ||
		strings.Join(groups[1].SafeSearch, ",") != "google" {
		t.Errorf("GET /api/filter/groups: %+v", groups)
	}
	if _, err := os.Stat(filepath.Join(dir, SwitchesFile)); err != nil {
		t.Fatal(err)
	}

	// A restart: a new engine over the same state directory.
	e2 := newEngine(t, cfg.Filter)
	s2 := e2.NewStage(cfg, time.UTC)
	if !blocked(s2, "www.tiktok.com.") || blocked(s2, "www.youtube.com.") {
		t.Fatal("the switches did not survive the restart")
	}
	srv2 := api(t, e2, func() *Stage { return s2 })
	if code := call(t, srv2, "POST", "/api/filter/groups/switch?group=kids&service=youtube&state=config", &a); code != 200 || !a.Changed {
		t.Fatalf("back to the configuration: %d %+v", code, a)
	}
	if !blocked(s2, "www.youtube.com.") {
		t.Error("state=config did not bring the configuration back")
	}

	for path, want := range map[string]int{
		"/api/filter/groups/switch?group=kidz&service=tiktok&state=on":                    404,
		"/api/filter/groups/switch?group=kids&service=tiktock&state=on":                   404,
		"/api/filter/groups/switch?group=kids&safe_search=yahoo&state=on":                 404,
		"/api/filter/groups/switch?group=kids&service=tiktok&state=maybe":                 400,
		"/api/filter/groups/switch?group=kids&state=on":                                   400,
		"/api/filter/groups/switch?group=kids&service=tiktok&safe_search=google&state=on": 400,
	} {
		if code := call(t, srv2, "POST", path, nil); code != want {
			t.Errorf("%s: %d, want %d", path, code, want)
		}
	}
}

// TestSwitches_damagedFileIsReportedAndLosesNothing: a switches file that
// is not JSON, or names services the catalogue does not have, does not
// stop the engine; the known switches in it apply.
func TestSwitches_damagedFileIsReportedAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	writeList(t, dir, SwitchesFile, `{"kids": {"services": {"tiktok": true, "myspace": true}, "safe_search": {"altavista": true}}, "": {"services": {"x": true}}}`)
	cfg := householdCfg(nil, nil, nil)
	cfg.Filter.StateDir = dir
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	if _, ev := ask(t, s, &next{}, "192.168.1.30", "tiktok.com.", dns.TypeA); !ev.Filter.Blocked {
		t.Error("the known switch of the file did not apply")
	}
	if got := e.overrides.snapshot(); len(got) != 1 || len(got["kids"].Services) != 1 || len(got["kids"].SafeSearch) != 0 {
		t.Errorf("overrides %+v: want only kids' tiktok", got)
	}
	dir2 := t.TempDir()
	writeList(t, dir2, SwitchesFile, "\x00\x01 not json")
	cfg.Filter.StateDir = dir2
	e2 := newEngine(t, cfg.Filter)
	s2 := e2.NewStage(cfg, time.UTC)
	if _, ev := ask(t, s2, &next{}, "192.168.1.30", "tiktok.com.", dns.TypeA); ev.Filter.Blocked {
		t.Error("a damaged file switched something on")
	}
}

// TestStage_safeSearchAnswersACNAMEAndResolvesTheTarget: the kids' query
// for a search engine goes down the chain as a query for the engine's safe
// endpoint, and comes back as the CNAME followed by the endpoint's answer;
// the fast path never answers the engine's name for them from the cache; a
// group's moderate YouTube gives way to another applying group's strict.
func TestStage_safeSearchAnswersACNAMEAndResolvesTheTarget(t *testing.T) {
	cfg := householdCfg(nil, []string{"google", "youtube"}, nil)
	cfg.Filter.Groups[0].SafeSearch = []string{"youtube"}
	cfg.Filter.Groups[0].YouTubeMode = "moderate"
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	var asked []string
	n := nextFunc(func(r *query.Request) { asked = append(asked, r.Msg.Question[0].Name) })
	for _, tc := range []struct{ client, name, target string }{
		{"192.168.1.30", "www.google.com.", "forcesafesearch.google.com."},
		{"192.168.1.30", "WWW.Google.CO.UK.", "forcesafesearch.google.com."},
		{"192.168.1.30", "www.youtube.com.", "restrict.youtube.com."}, // kids strict over default's moderate
		{"192.168.1.99", "www.youtube.com.", "restrictmoderate.youtube.com."},
	} {
		asked = nil
		ev := &query.Event{Client: netip.MustParseAddr(tc.client)}
		resp, err := s.Answer(context.Background(), &query.Request{Msg: new(dns.Msg).SetQuestion(tc.name, dns.TypeA), Event: ev}, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(asked) != 1 || asked[0] != tc.target {
			t.Errorf("%s from %s: the chain was asked %v, want %s", tc.name, tc.client, asked, tc.target)
		}
		if len(resp.Answer) != 2 || resp.Question[0].Name != tc.name {
			t.Fatalf("%s: %v", tc.name, resp)
		}
		c, ok := resp.Answer[0].(*dns.CNAME)
		if !ok || c.Hdr.Name != tc.name || c.Target != tc.target || resp.Answer[1].Header().Name != tc.target {
			t.Errorf("%s: answer %v, want the CNAME to %s then its A", tc.name, resp.Answer, tc.target)
		}
		if ev.Filter.SafeSearch == "" || ev.Filter.Blocked {
			t.Errorf("%s: event %+v", tc.name, ev.Filter)
		}
		ev2 := &query.Event{Client: ev.Client, Name: strings.ToLower(tc.name), Qtype: dns.TypeA, Qclass: dns.ClassINET}
		if s.Passes(ev2, nil) {
			t.Errorf("%s: Passes would let the fast path answer it from the cache", tc.name)
		}
	}
	// Not an engine's search name, or not a switched engine: passed on as is.
	for _, name := range []string{"mail.google.com.", "www.bing.com."} {
		asked = nil
		ev := &query.Event{Client: netip.MustParseAddr("192.168.1.30")}
		if _, err := s.Answer(context.Background(), &query.Request{Msg: new(dns.Msg).SetQuestion(name, dns.TypeA), Event: ev}, n); err != nil {
			t.Fatal(err)
		}
		if len(asked) != 1 || asked[0] != name || ev.Filter.SafeSearch != "" {
			t.Errorf("%s: asked %v, event %+v: want it passed on untouched", name, asked, ev.Filter)
		}
	}
	d := s.Check("www.google.de", netip.MustParseAddr("192.168.1.30"), "", time.Now())
	if d.SafeSearch != "google" || d.Target != "forcesafesearch.google.com" || !strings.Contains(d.Explanation, "safe search: google (group kids)") {
		t.Errorf("check: %+v", d)
	}
}

// nextFunc is a next link that answers every query with an A record, after
// calling seen.
type nextFunc func(r *query.Request)

func (f nextFunc) Answer(ctx context.Context, r *query.Request) (*dns.Msg, error) {
	f(r)
	return (&next{}).Answer(ctx, r)
}

// TestEngineBits_followTheCatalogue: each engine has its own bit, in the
// catalogue's order, so counters and switches agree on which is which.
func TestEngineBits_followTheCatalogue(t *testing.T) {
	for i, e := range catalog.Engines {
		if got := engineBit(e); got != 1<<i {
			t.Errorf("engineBit(%s) = %b, want %b", e, got, 1<<i)
		}
	}
	if engineBit("altavista") != 0 {
		t.Error("an unknown engine has a bit")
	}
}
