package app

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
)

// session is a logged-in browser of the dashboard: its cookie jar and the
// CSRF token its pages carry.
type session struct {
	c    *http.Client
	base string
	csrf string
}

func login(t *testing.T, base, password string) *session {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	s := &session{c: &http.Client{Jar: jar}, base: base}
	resp, err := s.c.PostForm(base+"/login", url.Values{"password": {password}, "next": {"/lists"}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf-token" content="([0-9a-f]{64})"`).FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("login: %d, no CSRF token in %s", resp.StatusCode, b)
	}
	s.csrf = string(m[1])
	return s
}

func (s *session) do(t *testing.T, method, path string, csrf bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.base+path, nil)
	if csrf {
		req.Header.Set("X-CSRF-Token", s.csrf)
	}
	resp, err := s.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// passwordConfig is a configuration with a loopback DNS listener, a web
// listener with the password "pw-long-enough", a list "ads" blocking
// ads.example and a state directory: the dashboard's mutating routes as
// a household uses them. base is the web listener's URL.
func passwordConfig(t *testing.T) (r *rig, cfg config.Config, dnsAddr, base string) {
	t.Helper()
	r = newRig(t)
	dnsAddr = loopbackAddr(t)
	cfg = r.config(t, dnsAddr, false)
	base = r.withPassword(t, &cfg)
	list := filepath.Join(r.dir, "ads.txt")
	if err := os.WriteFile(list, []byte("||ads.example^\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Filter.Lists = append(cfg.Filter.Lists, filterList("ads", list))
	cfg.Filter.StateDir = t.TempDir()
	return r, cfg, dnsAddr, base
}

// TestAllow_blockedNameAnsweredAfterThePostAcrossReloadAndRestart: through
// the real App with a password: a listed name is blocked; POST
// /api/filter/allow without the CSRF token is refused and changes nothing;
// with it the name is answered by the upstream, /api/filter/check and the
// lists page say "allowed from the dashboard"; a reload that rebuilds the
// lists and a restart from filter.state_dir keep it; DELETE undoes it.
func TestAllow_blockedNameAnsweredAfterThePostAcrossReloadAndRestart(t *testing.T) {
	r, cfg, dnsAddr, base := passwordConfig(t)
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel()})
	if err != nil {
		t.Fatal(err)
	}
	if !blockedVia(t, dnsAddr, "x.ads.example.") {
		t.Fatal("x.ads.example not blocked at start")
	}
	s := login(t, base, "pw-long-enough")
	if code, body := s.do(t, "POST", "/api/filter/allow?name=x.ads.example", false); code != http.StatusForbidden {
		t.Fatalf("allow without the CSRF token: %d %s, want 403", code, body)
	}
	if anon, _ := (&session{c: http.DefaultClient, base: base}).do(t, "POST", "/api/filter/allow?name=x.ads.example", false); anon != http.StatusUnauthorized {
		t.Fatalf("allow without a login: %d, want 401", anon)
	}
	if !blockedVia(t, dnsAddr, "x.ads.example.") {
		t.Fatal("a refused allow changed the answer")
	}
	if code, body := s.do(t, "POST", "/api/filter/allow?name=x.ads.example", true); code != http.StatusOK || !strings.Contains(body, `"allowed":true`) {
		t.Fatalf("allow: %d %s", code, body)
	}
	ask(t, dnsAddr, "x.ads.example.") // the upstream's answer, not the block
	if _, body := s.do(t, "GET", "/api/filter/check?name=x.ads.example", false); !strings.Contains(body, `"explanation":"allowed from the dashboard`) || !strings.Contains(body, `"blocked":false`) {
		t.Errorf("check: %s", body)
	}
	if _, page := s.do(t, "GET", "/lists", false); !strings.Contains(page, `data-name="x.ads.example"`) {
		t.Errorf("the lists page does not show the allowed name")
	}

	cfg.Filter.Block = []string{"more.example"} // a reload that rebuilds the rules
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	ask(t, dnsAddr, "x.ads.example.")
	if !blockedVia(t, dnsAddr, "more.example.") {
		t.Fatal("the reload did not apply")
	}
	shutdown(t, a)

	a = r.start(t, cfg) // a restart: the same state directory
	ask(t, dnsAddr, "x.ads.example.")
	if !blockedVia(t, dnsAddr, "ads.example.") {
		t.Error("the allowed name's parent is answered after the restart")
	}
	s = login(t, base, "pw-long-enough") // a restart ends the sessions
	if code, body := s.do(t, "DELETE", "/api/filter/allow?name=x.ads.example", true); code != http.StatusOK || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("delete: %d %s", code, body)
	}
	if !blockedVia(t, dnsAddr, "x.ads.example.") {
		t.Error("still answered after the allow was removed")
	}
	if got := a.filter.Allowed(); len(got) != 0 {
		t.Errorf("allowed after removal: %v", got)
	}
}

// TestDashboard_listsAndCachePagesShowRealState: after real queries, the
// lists page shows the list with its rules, age and outcome (and a list
// that failed to load, with its error), and the cache page its entries and
// hit rate; a name the cache page shows came from a LAN client and is
// escaped.
func TestDashboard_listsAndCachePagesShowRealState(t *testing.T) {
	r := newRig(t)
	dnsAddr := loopbackAddr(t)
	cfg := r.config(t, dnsAddr, false)
	webPort := testutil.FreePort(t)
	cfg.Web.Listen = fmt.Sprintf("127.0.0.1:%d", webPort)
	list := filepath.Join(r.dir, "ads.txt")
	if err := os.WriteFile(list, []byte("0.0.0.0 ads.example\n0.0.0.0 more.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Filter.Lists = append(cfg.Filter.Lists, filterList("ads", list), config.FilterList{Name: "gone", Path: filepath.Join(r.dir, "missing.txt")})
	r.start(t, cfg)
	blockedVia(t, dnsAddr, "ads.example.")
	ask(t, dnsAddr, "cached.example.")
	ask(t, dnsAddr, "cached.example.")
	base := fmt.Sprintf("http://127.0.0.1:%d", webPort)

	lists := get(t, base+"/lists", http.StatusOK)
	for _, want := range []string{
		`<td>ads<br>`, `<td class="n">2</td>`, "just now", "<td>ok", `<td class="n">1</td>`, // rules, age, outcome, blocked
		"gone", "failed, never loaded", "missing.txt",
		`href="/lists" aria-current="page"`,
	} {
		if !strings.Contains(lists, want) {
			t.Errorf("lists page lacks %q", want)
		}
	}
	page := get(t, base+"/cache", http.StatusOK)
	for _, want := range []string{`<span class="num" id="entries">1</span>`, `<span class="num" id="hitrate">50.0%</span>`, `id="stale">0<`, `data-action="/api/cache/flush"`} {
		if !strings.Contains(page, want) {
			t.Errorf("cache page lacks %q", want)
		}
	}
}
