package app

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestBlock_fromTheDashboardThroughTheLoginCSRFAndOrigin: through the real
// App with a password, each new mutating route (block, block/remove)
// refuses a request without a login (401), without the CSRF token (403)
// and from another origin (403), and a name with markup (400); with all
// three a name is blocked for DNS at once, shown on "changes made here"
// with its TOML and NixOS lines; that TOML in the file, reloaded, with the
// change dropped, answers the same. The banner fragment
// is private too.
func TestBlock_fromTheDashboardThroughTheLoginCSRFAndOrigin(t *testing.T) {
	r, cfg, dnsAddr, base := passwordConfig(t)
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel()})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(t, a)

	s := login(t, base, "pw-long-enough")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	anon := &session{c: noRedirect, base: base}
	for _, route := range []string{"/api/filter/block?name=video.example", "/api/filter/block/remove?name=video.example"} {
		if code, _ := anon.do(t, "POST", route, false); code != http.StatusUnauthorized {
			t.Errorf("%s without a login: %d, want 401", route, code)
		}
		if code, _ := s.do(t, "POST", route, false); code != http.StatusForbidden {
			t.Errorf("%s without the CSRF token: %d, want 403", route, code)
		}
		req, _ := http.NewRequest("POST", base+route, nil)
		req.Header.Set("X-CSRF-Token", s.csrf)
		req.Header.Set("Origin", "http://evil.example")
		resp, err := s.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s cross-origin: %d, want 403", route, resp.StatusCode)
		}
	}
	if blockedVia(t, dnsAddr, "video.example.") {
		t.Fatal("a refused block changed the answer")
	}
	if code, body := s.do(t, "POST", "/api/filter/block?name="+url.QueryEscape("<b>x</b>.example"), true); code != http.StatusBadRequest {
		t.Errorf("a name with markup: %d %s, want 400", code, body)
	}
	if code, body := s.do(t, "POST", "/api/filter/block?name=video.example", true); code != http.StatusOK || !strings.Contains(body, `"blocked":true`) {
		t.Fatalf("block: %d %s", code, body)
	}
	if !blockedVia(t, dnsAddr, "cdn.video.example.") {
		t.Fatal("cdn.video.example not blocked after the block")
	}
	_, page := s.do(t, "GET", "/changes", false)
	for _, want := range []string{`block = [&#34;||video.example^&#34;]`, `services.nxdns.settings.filter.block = [ &#34;||video.example^&#34; ];`} {
		if !strings.Contains(page, want) {
			t.Errorf("changes page lacks %s", want)
		}
	}
	if _, page := s.do(t, "GET", "/clients/127.0.0.1", false); !strings.Contains(page, `id="filter-now">every list (no group applies now)`) {
		t.Error("the client page does not say which lists apply to it now")
	}
	if code, _ := anon.do(t, "GET", "/status/banner", false); code == http.StatusOK {
		t.Error("the banner fragment is served without a login")
	}
	// The page's TOML, in the file and reloaded, with the change dropped:
	// the same answers, now from the file.
	cfg.Filter.Block = append(cfg.Filter.Block, "||video.example^")
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if code, body := s.do(t, "POST", "/api/filter/block/remove?name=video.example", true); code != http.StatusOK || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("drop: %d %s", code, body)
	}
	if !blockedVia(t, dnsAddr, "cdn.video.example.") {
		t.Fatal("the TOML from the changes page, reloaded, does not block what the change did")
	}
	cfg.Filter.Block = cfg.Filter.Block[:len(cfg.Filter.Block)-1]
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if blockedVia(t, dnsAddr, "cdn.video.example.") {
		t.Fatal("still blocked with neither the change nor the rule")
	}
}
