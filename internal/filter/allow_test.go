package filter

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// TestAllow_winsOverEveryBlockRule: a name allowed at run time is answered
// (forwarded) for every client, over a subtree rule, an $important rule and
// a CNAME that reaches a blocked name; its parent stays blocked; undoing it
// blocks it again. The check endpoint says why.
func TestAllow_winsOverEveryBlockRule(t *testing.T) {
	cfg := filterCfg(t)
	dir := t.TempDir()
	cfg.Filter.Lists = append(cfg.Filter.Lists, config.FilterList{Name: "strict", Path: writeList(t, dir, "strict.txt", "||imp.example^$important\n")})
	cfg.Filter.Groups[0].Lists = append(cfg.Filter.Groups[0].Lists, "strict")
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)

	for _, name := range []string{"x.tracker.example.", "imp.example."} {
		n := &next{}
		if _, ev := ask(t, s, n, "192.168.1.5", name, dns.TypeA); ev.Source != query.SourceBlocked || n.got != 0 {
			t.Fatalf("%s not blocked before the allow", name)
		}
		kept, added, err := e.Allow(strings.ToUpper(name))
		if err != nil || !added || kept != strings.TrimSuffix(name, ".") {
			t.Fatalf("Allow(%s) = %q %v %v", name, kept, added, err)
		}
		for _, q := range []string{name, "deeper." + name} {
			n := &next{}
			if _, ev := ask(t, s, n, "192.168.1.30", q, dns.TypeA); ev.Source == query.SourceBlocked || n.got != 1 {
				t.Errorf("%s blocked after allowing %s", q, name)
			}
		}
	}
	if _, ev := ask(t, s, &next{}, "192.168.1.5", "tracker.example.", dns.TypeA); ev.Source != query.SourceBlocked {
		t.Error("the allowed name's parent is no longer blocked")
	}
	// CNAME cloaking: an allowed name whose answer points at a blocked one
	// is answered, as the operator asked.
	n := &next{cname: "ads.example."}
	if _, ev := ask(t, s, n, "192.168.1.5", "site.example.", dns.TypeA); ev.Source != query.SourceBlocked {
		t.Fatal("the CNAME to a blocked name is not blocked before the allow")
	}
	if _, _, err := e.Allow("site.example"); err != nil {
		t.Fatal(err)
	}
	if resp, ev := ask(t, s, n, "192.168.1.5", "site.example.", dns.TypeA); ev.Source == query.SourceBlocked || len(resp.Answer) != 2 {
		t.Error("an allowed name with a CNAME to a blocked one is still blocked")
	}

	d := s.Check("x.tracker.example", netip.MustParseAddr("192.168.1.5"), "", time.Now())
	if d.Blocked || !d.Allowlisted || !d.FromDashboard || d.List != DashboardList || d.Rule != "||x.tracker.example^" || !strings.HasPrefix(d.Explanation, "allowed from the dashboard") {
		t.Errorf("check of an allowed name: %+v", d)
	}
	if got := e.Allowed(); !slices.Equal(got, []string{"imp.example", "site.example", "x.tracker.example"}) {
		t.Errorf("Allowed() = %v", got)
	}

	if _, removed, err := e.Unallow("x.tracker.example."); err != nil || !removed {
		t.Fatalf("Unallow: %v %v", removed, err)
	}
	if _, ev := ask(t, s, &next{}, "192.168.1.5", "x.tracker.example.", dns.TypeA); ev.Source != query.SourceBlocked {
		t.Error("still answered after the allow was removed")
	}
	if d := s.Check("x.tracker.example", netip.MustParseAddr("192.168.1.5"), "", time.Now()); !d.Blocked || d.Explanation != "blocked by list ads rule ||tracker.example^ of group default" {
		t.Errorf("check after removal: %+v", d)
	}
	if _, _, err := e.Allow("not a name"); err == nil {
		t.Error("Allow took a sentence")
	}
}

// TestAllow_survivesReloadAndRestartFromTheStateDir: the names are kept in
// filter.state_dir: a reload that rebuilds the lists keeps them, a new
// Engine (a restart) reads them back, a removal is written too, and the
// file on disk is only ever whole (written through a rename).
func TestAllow_survivesReloadAndRestartFromTheStateDir(t *testing.T) {
	cfg := filterCfg(t)
	cfg.Filter.StateDir = t.TempDir()
	e := newEngine(t, cfg.Filter)
	if _, _, err := e.Allow("ads.example"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Allow("tracker.example"); err != nil {
		t.Fatal(err)
	}
	cfg.Filter.Block = append(cfg.Filter.Block, "more.example") // a rebuild
	e.Update(cfg.Filter)
	if d := e.NewStage(cfg, time.UTC).Check("ads.example", netip.MustParseAddr("192.168.1.5"), "", time.Now()); d.Blocked || !d.FromDashboard {
		t.Errorf("after a reload: %+v", d)
	}

	restarted := newEngine(t, cfg.Filter)
	if got := restarted.Allowed(); !slices.Equal(got, []string{"ads.example", "tracker.example"}) {
		t.Fatalf("after a restart: %v", got)
	}
	if _, _, err := restarted.Unallow("ads.example"); err != nil {
		t.Fatal(err)
	}
	again := newEngine(t, cfg.Filter)
	if got := again.Allowed(); !slices.Equal(got, []string{"tracker.example"}) {
		t.Fatalf("after a removal and a restart: %v", got)
	}
	entries, _ := os.ReadDir(cfg.Filter.StateDir)
	for _, de := range entries {
		if de.Name() != AllowFile {
			t.Errorf("left behind in the state directory: %s", de.Name())
		}
	}

	// A state directory nxdns cannot write: the allow applies, the answer
	// says it was not saved.
	ro := newEngine(t, config.Filter{StateDir: filepath.Join(t.TempDir(), "missing")})
	if _, _, err := ro.Allow("x.example"); err == nil || !strings.Contains(err.Error(), AllowFile) {
		t.Errorf("unsaved allow: %v", err)
	}
	if !slices.Equal(ro.Allowed(), []string{"x.example"}) {
		t.Error("an allow that could not be saved does not apply")
	}
}

// TestAllow_hostileFileIsNotRead: a FIFO, an oversized file and lines that
// are no names: the FIFO and the big file are not read (and never hang the
// start), bad lines are skipped, good ones taken.
func TestAllow_hostileFileIsNotRead(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, AllowFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := newEngine(t, config.Filter{StateDir: dir}); len(e.Allowed()) != 0 {
		t.Error("names from a FIFO")
	}
	big := t.TempDir()
	writeList(t, big, AllowFile, "a.example\n"+strings.Repeat("#", maxAllowedBytes))
	if e := newEngine(t, config.Filter{StateDir: big}); len(e.Allowed()) != 0 {
		t.Error("names from an oversized file")
	}
	mixed := t.TempDir()
	writeList(t, mixed, AllowFile, "# comment\n<script>alert(1)</script>\nGood.Example.\n\n1.2.3.4 x\n")
	if e := newEngine(t, config.Filter{StateDir: mixed}); !slices.Equal(e.Allowed(), []string{"good.example"}) {
		t.Errorf("from a mixed file: %v", e.Allowed())
	}
}

// TestAllow_concurrentChangesAndLookups: changes race lookups (run with
// -race); every lookup sees a whole map and the end state is exact.
func TestAllow_concurrentChangesAndLookups(t *testing.T) {
	e := newEngine(t, config.Filter{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					e.allow.match("a.n1.example")
				}
			}
		})
	}
	var writers sync.WaitGroup
	for w := range 4 {
		writers.Go(func() {
			for i := range 200 {
				name := "n" + string(rune('0'+w)) + ".example"
				if i%2 == 0 {
					_, _, _ = e.Allow(name)
				} else {
					_, _, _ = e.Unallow(name)
				}
			}
			_, _, _ = e.Allow("kept" + string(rune('0'+w)) + ".example")
		})
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if got := e.Allowed(); !slices.Equal(got, []string{"kept0.example", "kept1.example", "kept2.example", "kept3.example"}) {
		t.Errorf("end state %v", got)
	}
}

// TestAllow_api: POST allows, GET lists, DELETE and POST …/remove undo;
// a bad name is a 400 and changes nothing.
func TestAllow_api(t *testing.T) {
	e := newEngine(t, config.Filter{})
	mux := http.NewServeMux()
	for _, r := range e.Routes(func() *Stage { return nil }) {
		mux.Handle(r.Pattern, r.Handler)
	}
	call := func(method, target string, want int) map[string]any {
		t.Helper()
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
		if rec.Code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, target, rec.Code, rec.Body, want)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := call("POST", "/api/filter/allow?name=Ads.Example.", 200); got["name"] != "ads.example" || got["allowed"] != true || got["changed"] != true {
		t.Errorf("allow: %v", got)
	}
	if got := call("POST", "/api/filter/allow?name=ads.example", 200); got["changed"] != false {
		t.Errorf("allow again: %v", got)
	}
	call("POST", "/api/filter/allow?name=%3Cb%3E", 400)
	call("POST", "/api/filter/allow", 400)
	if got := call("GET", "/api/filter/allow", 200); len(got["names"].([]any)) != 1 {
		t.Errorf("list: %v", got)
	}
	if got := call("DELETE", "/api/filter/allow?name=ads.example", 200); got["allowed"] != false || got["changed"] != true {
		t.Errorf("delete: %v", got)
	}
	call("POST", "/api/filter/allow?name=b.example", 200)
	if got := call("POST", "/api/filter/allow/remove?name=b.example", 200); got["changed"] != true {
		t.Errorf("remove: %v", got)
	}
	if got := call("GET", "/api/filter/allow", 200); len(got["names"].([]any)) != 0 {
		t.Errorf("list after removals: %v", got)
	}
}
