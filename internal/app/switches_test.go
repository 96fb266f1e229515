package app

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/web"
)

// TestDashboard_groupsPageSwitchesAServiceForAGroup: through the real App
// with a password, the groups page shows the kids' services as switches;
// its switch (POST /api/filter/groups/switch with the page's CSRF token)
// blocks TikTok for the kids' device at once, the page then shows it
// blocked with a way back to the configuration; without the token the
// switch is refused and changes nothing; a reload keeps the switch.
func TestDashboard_groupsPageSwitchesAServiceForAGroup(t *testing.T) {
	r := newRig(t)
	dnsAddr := loopbackAddr(t)
	cfg := r.config(t, dnsAddr, false)
	base := r.withPassword(t, &cfg)
	cfg.Filter.StateDir = t.TempDir()
	cfg.Filter.Groups = []config.FilterGroup{{Name: "kids", Clients: []string{"127.0.0.0/8"}, SafeSearch: []string{"bing"}}}
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel()})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)
	if blockedVia(t, dnsAddr, "www.tiktok.com.") {
		t.Fatal("TikTok blocked before the switch")
	}
	s := login(t, base, "pw-long-enough")
	_, page := s.do(t, "GET", "/groups", false)
	for _, want := range []string{`data-group="kids" data-id="tiktok" data-state="on"`, "TikTok: allowed", "bing: forced", `src="/static/switches.js"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the groups page lacks %q:\n%s", want, page)
		}
	}
	switchOn := "/api/filter/groups/switch?group=kids&service=tiktok&state=on"
	if code, _ := s.do(t, "POST", switchOn, false); code != http.StatusForbidden {
		t.Fatalf("a switch without the CSRF token: %d, want 403", code)
	}
	if blockedVia(t, dnsAddr, "www.tiktok.com.") {
		t.Fatal("a refused switch changed the answer")
	}
	if code, body := s.do(t, "POST", switchOn, true); code != http.StatusOK || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("switch: %d %s", code, body)
	}
	if !blockedVia(t, dnsAddr, "www.tiktok.com.") {
		t.Fatal("TikTok not blocked after the switch")
	}
	if _, page = s.do(t, "GET", "/groups", false); !strings.Contains(page, "TikTok: blocked") || !strings.Contains(page, `data-id="tiktok" data-state="config"`) {
		t.Errorf("the page does not show the switch:\n%s", page)
	}
	cfg.Filter.Block = []string{"more.example"}
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if !blockedVia(t, dnsAddr, "www.tiktok.com.") {
		t.Error("the reload lost the switch")
	}
	if _, js := s.do(t, "GET", "/static/switches.js", false); !strings.Contains(js, "/api/filter/groups/switch") {
		t.Error("switches.js is not served")
	}
}

// withPassword gives cfg a loopback web listener behind the password
// "pw-long-enough" and returns the dashboard's base URL.
func (r *rig) withPassword(t *testing.T, cfg *config.Config) string {
	t.Helper()
	webPort := testutil.FreePort(t)
	cfg.Web.Listen = fmt.Sprintf("127.0.0.1:%d", webPort)
	hash, err := web.HashPassword([]byte("pw-long-enough"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Web.PasswordFile = r.write(t, hash+"\n")
	return fmt.Sprintf("http://127.0.0.1:%d", webPort)
}
