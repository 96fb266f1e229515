package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/web"
)

// TestDashboard_showsAQueriedMarkupNameAsText: a LAN client asks for a
// name made of HTML; the query log page and the overview, served by the
// real App after the real DNS query, show it escaped, never as markup.
func TestDashboard_showsAQueriedMarkupNameAsText(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, webPort := webConfig(t, r)
	a := r.start(t, cfg)

	const evil = `<script>x=1</script><b>x</b>.evil.example.`
	ask(t, dnsAddr, evil)
	// The event is recorded after the answer was sent: wait for it.
	testutil.WaitFor(t, "the history to hold the query", 5*time.Second, func() bool { return historyRows(t, a) >= 1 })

	base := fmt.Sprintf("http://127.0.0.1:%d", webPort)
	for _, page := range []string{"/queries?name=script", "/", "/clients/127.0.0.1"} {
		body := get(t, base+page, http.StatusOK)
		if strings.Contains(body, "<script>x=1") || strings.Contains(body, "<b>x</b>") {
			t.Errorf("%s renders the queried name as markup", page)
		}
		// Names break at their dots (a <wbr> after each, docs/dashboard.md
		// "Layout"): the text is read without them.
		if !strings.Contains(strings.ReplaceAll(body, "<wbr>", ""), "&lt;script&gt;x=1&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;.evil.example") {
			t.Errorf("%s does not show the queried name as text", page)
		}
	}
	var q struct {
		Queries []struct {
			Name, Why, Source string
		} `json:"queries"`
	}
	if err := json.Unmarshal([]byte(get(t, base+"/api/queries?name=%3Cscript", http.StatusOK)), &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Queries) != 1 || q.Queries[0].Name != evil || q.Queries[0].Source != "pool" || !strings.HasPrefix(q.Queries[0].Why, "forwarded to tls://") {
		t.Fatalf("api: %+v", q.Queries)
	}
}

// historyRows is how many rows a's history holds (up to one page).
func historyRows(t *testing.T, a *App) int {
	t.Helper()
	p, err := a.history.Search(context.Background(), history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Rows)
}

func get(t *testing.T, url string, want int) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, want, b)
	}
	return string(b)
}

// TestHistory_unusableStoreLeavesDNSAndReportsDegraded: history.path under a
// regular file cannot be created; nxdns starts, answers, keeps the history
// in memory and says so in /api/health.
func TestHistory_unusableStoreLeavesDNSAndReportsDegraded(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, webPort := webConfig(t, r)
	notADir := r.write(t, "")
	cfg.History.Path = notADir + "/history.db"
	r.start(t, cfg)
	ask(t, dnsAddr, "works.example.")

	var h struct {
		Status  string
		History struct{ Status, Store, Problem string }
	}
	if err := json.Unmarshal([]byte(get(t, fmt.Sprintf("http://127.0.0.1:%d/api/health", webPort), http.StatusOK)), &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || h.History.Status != "degraded" || h.History.Store != "memory" || !strings.Contains(h.History.Problem, "history.db") {
		t.Fatalf("health: %+v", h)
	}
	// The event is recorded after the answer was sent: wait for it.
	testutil.WaitFor(t, "the in-memory history to show the query", 5*time.Second, func() bool {
		return strings.Contains(get(t, fmt.Sprintf("http://127.0.0.1:%d/queries?name=works", webPort), http.StatusOK), "works.example.")
	})
}

// TestHistory_survivesReloadAndPasswordApplies: the history is the App's,
// not a generation's: queries before and after a reload are both in it.
// The reload also turns the login on for the running web endpoint.
func TestHistory_survivesReloadAndPasswordApplies(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, webPort := webConfig(t, r)
	a := r.start(t, cfg)
	ask(t, dnsAddr, "before.example.")

	reloadWithPassword(t, r, a, cfg, "pw-long-enough")
	ask(t, dnsAddr, "after.example.")
	base := fmt.Sprintf("http://127.0.0.1:%d", webPort)
	get(t, base+"/api/queries", http.StatusUnauthorized) // the login is on

	// Each event is recorded after its answer was sent: wait for both.
	testutil.WaitFor(t, "the history to hold both queries", 5*time.Second, func() bool { return historyRows(t, a) >= 2 })
	p, err := a.history.Search(context.Background(), history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rows) != 2 || p.Rows[0].Name != "after.example." || p.Rows[1].Name != "before.example." {
		t.Fatalf("history after a reload: %+v", p.Rows)
	}

	// A password file that holds no hash fails the reload and changes nothing.
	cfg3 := cfg
	cfg3.Web.PasswordFile = r.write(t, "hunter2\n")
	if err := a.Reload(cfg3); err == nil || !strings.Contains(err.Error(), "web.password_file") {
		t.Fatalf("reload with a plain-text password file: %v", err)
	}
	get(t, base+"/api/queries", http.StatusUnauthorized)
}

// TestWebPassword_unreadableAtStartLocksTheDashboardNotDNS: a
// web.password_file that cannot be read at start (missing here) does not
// stop nxdns: DNS answers, the private API wants a login nobody can pass,
// /api/health names the problem, and a reload with a good file unlocks it.
func TestWebPassword_unreadableAtStartLocksTheDashboardNotDNS(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, webPort := webConfig(t, r)
	cfg.Web.PasswordFile = r.write(t, "") + ".missing"
	a := r.start(t, cfg)
	ask(t, dnsAddr, "still.example.") // DNS serves

	base := fmt.Sprintf("http://127.0.0.1:%d", webPort)
	get(t, base+"/api/queries", http.StatusUnauthorized) // locked, not open: the operator asked for a login
	var h struct {
		Status   string
		Problems []string
	}
	if err := json.Unmarshal([]byte(get(t, base+"/api/health", http.StatusOK)), &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || !slices.ContainsFunc(h.Problems, func(p string) bool { return strings.Contains(p, "dashboard locked") }) {
		t.Fatalf("health %+v: want degraded, naming the locked dashboard", h)
	}

	reloadWithPassword(t, r, a, cfg, "pw-long-enough")
	h.Problems = nil // absent from an ok answer (omitempty): Unmarshal would keep the old ones
	if err := json.Unmarshal([]byte(get(t, base+"/api/health", http.StatusOK)), &h); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(h.Problems, func(p string) bool { return strings.Contains(p, "dashboard locked") }) {
		t.Errorf("after a reload with a readable file the health still says %v", h.Problems)
	}
}

// reloadWithPassword reloads a with cfg plus a web.password_file holding
// password's hash.
func reloadWithPassword(t *testing.T, r *rig, a *App, cfg config.Config, password string) {
	t.Helper()
	hash, err := web.HashPassword([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Web.PasswordFile = r.write(t, hash+"\n")
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// webConfig is r's configuration with DNS on a loopback address of its own
// and the web endpoint on a free loopback port.
func webConfig(t *testing.T, r *rig) (cfg config.Config, dnsAddr string, webPort uint16) {
	t.Helper()
	dnsAddr = loopbackAddr(t)
	cfg = r.config(t, dnsAddr, false)
	webPort = testutil.FreePort(t)
	cfg.Web.Listen = fmt.Sprintf("127.0.0.1:%d", webPort)
	return cfg, dnsAddr, webPort
}
