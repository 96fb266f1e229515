package app

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/web"
)

// The dashboard's Tokens page through the real App with a password: a
// logged-in browser adds a token (shown once on the answer, never on the
// page again, the file holding its hash), the token reads /api/overview,
// the page revokes it and it is refused from the next request; the form
// without the session's CSRF token is refused; a request with the token
// and the browser's session cookie together is judged by the token alone.
func TestTokens_dashboardPageAddsShowsOnceAndRevokes(t *testing.T) {
	_, cfg, base, s := passwordApp(t)
	post := func(path string, form url.Values) (int, string) {
		resp, err := s.c.PostForm(base+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := post("/tokens", url.Values{"name": {"ha"}, "scope": {"read"}}); code != http.StatusForbidden {
		t.Errorf("add without the CSRF token: %d, want 403", code)
	}
	code, body := post("/tokens", url.Values{"csrf": {s.csrf}, "name": {"ha"}, "scope": {"read"}})
	m := regexp.MustCompile(`id="new-token">(nxdns_[0-9a-f]{64})<`).FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		t.Fatalf("add: %d, no token shown:\n%s", code, body)
	}
	token := m[1]
	if _, page := s.do(t, "GET", "/tokens", false); strings.Contains(page, token) || !strings.Contains(page, "<td>ha</td>") {
		t.Error("the tokens page shows the token again, or not its name")
	}
	if b, _ := os.ReadFile(cfg.Filter.StateDir + "/" + web.TokensFile); strings.Contains(string(b), token[len(web.TokenPrefix):]) {
		t.Error("the state directory holds the token itself")
	}
	bearer := func(cookie bool) int {
		req, _ := http.NewRequest("GET", base+"/api/overview", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		c := http.DefaultClient
		if cookie {
			c = s.c // the logged-in browser's jar
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := bearer(false); code != http.StatusOK {
		t.Fatalf("the new token on /api/overview: %d", code)
	}
	if code, _ := post("/tokens/revoke", url.Values{"csrf": {s.csrf}, "name": {"ha"}}); code != http.StatusOK { // 303 to /tokens, followed
		t.Fatalf("revoke: %d", code)
	}
	if code := bearer(false); code != http.StatusUnauthorized {
		t.Errorf("the revoked token: %d, want 401", code)
	}
	if code := bearer(true); code != http.StatusUnauthorized {
		t.Errorf("the revoked token beside a live session cookie: %d, want 401 (judged by the token alone)", code)
	}
}

// Every route the running App registers that changes state (POST or
// DELETE) refuses a read token with 403 naming the scope, and every
// session-only route refuses any token: enumerated from the server's own
// route table, so a route added later with the wrong access is caught.
// The requests carry a live session cookie too, so a token is never
// helped by a browser's login.
func TestTokens_readTokenRefusedOnEveryMutatingRoute(t *testing.T) {
	a, cfg, base, s := passwordApp(t)
	read, err := web.AddToken(cfg.Filter.StateDir, "reader", web.ScopeRead, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := web.AddToken(cfg.Filter.StateDir, "ctl", web.ScopeControl, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wildcard := regexp.MustCompile(`\{[^}]*\}`)
	do := func(method, path, token string) (int, string) {
		req, _ := http.NewRequest(method, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-CSRF-Token", s.csrf) // the browser's, beside the token: no help
		resp, err := s.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	mutating, sessionRoutes := 0, 0
	for _, pat := range a.web.Routes() {
		method, path, ok := strings.Cut(pat, " ")
		if !ok {
			continue // a pattern for every method: none of the guarded ones
		}
		path = wildcard.ReplaceAllString(path, "x")
		sessionOnly := path == "/tokens" || path == "/tokens/revoke"
		switch {
		case sessionOnly:
			sessionRoutes++
			for _, tok := range []string{read, ctl} {
				if code, body := do(method, path, tok); code != http.StatusForbidden || !strings.Contains(body, "browser login") {
					t.Errorf("%s with a token: %d %q, want 403, session only", pat, code, body)
				}
			}
		case method == http.MethodPost || method == http.MethodDelete || method == http.MethodPut || method == http.MethodPatch:
			if path == "/login" {
				continue // Public: the password decides
			}
			mutating++
			if code, body := do(method, path, read); code != http.StatusForbidden || !strings.Contains(body, "has scope read") {
				t.Errorf("%s with a read token: %d %q, want 403 for its scope", pat, code, body)
			}
		}
	}
	if mutating < 10 {
		t.Fatalf("only %d mutating routes found in %v", mutating, a.web.Routes())
	}
	counts := map[string]uint64{}
	for _, c := range a.tokens.Counts() {
		counts[c.Name+"/"+c.Result] += c.N
	}
	if counts["reader/scope"] != uint64(mutating+sessionRoutes) || counts["reader/ok"] != 0 {
		t.Errorf("counts %v: want every refusal of reader counted as scope", counts)
	}
}

// passwordApp is a running App with a web password and a state directory
// (where tokens are kept), and a browser logged in to it.
func passwordApp(t *testing.T) (*App, config.Config, string, *session) {
	t.Helper()
	r := newRig(t)
	cfg, _, webPort := webConfig(t, r)
	hash, err := web.HashPassword([]byte("pw-long-enough"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Web.PasswordFile = r.write(t, hash+"\n")
	cfg.Filter.StateDir = t.TempDir()
	a := r.start(t, cfg)
	base := fmt.Sprintf("http://127.0.0.1:%d", webPort)
	return a, cfg, base, login(t, base, "pw-long-enough")
}
