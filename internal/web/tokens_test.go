package web

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// tokenServer is loginServer's routes with API tokens kept in a fresh
// state directory, plus a session-only route.
func tokenServer(t *testing.T) (*Server, string) {
	t.Helper()
	s, _ := loginServer(t)
	dir := t.TempDir()
	s.tokens = NewTokens()
	s.tokens.Configure(dir, false)
	return s, dir
}

// serveAs runs one request through the guard of route as if it came from
// remote, over TLS when tls is set, and returns the status and body.
func serveAs(s *Server, method, path, remote, token string, overTLS bool, hdr map[string]string) (int, string) {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	if overTLS {
		r.TLS = &tls.ConnectionState{}
	}
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// A bearer request is judged by its token alone: a valid session cookie
// beside a wrong token does not let it in, and a control token needs no
// CSRF token (it is not a browser's ambient credential). Over plain HTTP a
// token from another host is refused (and counted) unless
// web.tokens_over_http; over HTTPS or from loopback it is accepted. An
// expired token is refused; a session-only route refuses any token.
func TestTokens_judgedByTheTokenAloneAndNotOverPlainLANHTTP(t *testing.T) {
	s, dir := tokenServer(t)
	s.Handle("GET /admin", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), SessionRead)
	now := time.Now()
	ctl, err := AddToken(dir, "ctl", ScopeControl, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	old, err := AddToken(dir, "old", ScopeRead, time.Minute, now.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	const loop, lan = "127.0.0.1:4000", "192.168.1.20:4000"
	for _, tc := range []struct {
		name, method, path, remote, token string
		tls                               bool
		hdr                               map[string]string
		want                              int
		body                              string
	}{
		{"control token, no CSRF", "POST", "/api/act", loop, ctl, false, nil, 200, "done"},
		{"wrong token beside a cookie", "GET", "/api/private", loop, "nxdns_x", false, map[string]string{"Cookie": sessionCookie + "=" + strings.Repeat("a", 64)}, 401, "unknown API token"},
		{"plain HTTP from the LAN", "GET", "/api/private", lan, ctl, false, nil, 403, "plain HTTP"},
		{"HTTPS from the LAN", "GET", "/api/private", lan, ctl, true, nil, 200, ""},
		{"expired", "GET", "/api/private", loop, old, false, nil, 401, "expired"},
		{"session-only route", "GET", "/admin", loop, ctl, false, nil, 403, "browser login"},
		{"not Bearer", "GET", "/api/private", loop, "", false, map[string]string{"Authorization": "Basic YTpi"}, 401, "login required"},
		{"Bearer without a token", "GET", "/api/private", loop, "", false, map[string]string{"Authorization": "Bearer "}, 401, "Bearer"},
	} {
		code, body := serveAs(s, tc.method, tc.path, tc.remote, tc.token, tc.tls, tc.hdr)
		if code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("%s: %d %q, want %d with %q", tc.name, code, body, tc.want, tc.body)
		}
		if strings.Contains(body, ctl) {
			t.Errorf("%s: the answer echoes the token", tc.name)
		}
	}
	s.tokens.Configure(dir, true) // web.tokens_over_http
	if code, body := serveAs(s, "GET", "/api/private", lan, ctl, false, nil); code != 200 {
		t.Errorf("plain HTTP from the LAN with tokens_over_http: %d %q", code, body)
	}
	got := map[[2]string]uint64{}
	for _, c := range s.tokens.Counts() {
		got[[2]string{c.Name, c.Result}] = c.N
	}
	for k, want := range map[[2]string]uint64{
		{"ctl", TokenOK}: 3, {"ctl", TokenPlainHTTP}: 1, {"ctl", TokenScope}: 1,
		{"unknown", TokenUnknown}: 1, {"old", TokenExpired}: 1,
	} {
		if got[k] != want {
			t.Errorf("count %v: %d, want %d (all: %v)", k, got[k], want, got)
		}
	}
}

// The file keeps hashes only, with mode 0600; adds from two processes at
// once (the CLI and the dashboard) both land; a damaged file refuses every
// token (see TestTokens_damagedFileRefusesEveryTokenUntilFixed).
func TestTokens_fileHoldsHashesAndConcurrentAddsLand(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	tokens := make([]string, 8)
	for i := range tokens {
		wg.Go(func() {
			tok, err := AddToken(dir, "t"+string(rune('a'+i)), ScopeRead, 0, time.Now())
			if err != nil {
				t.Error(err)
			}
			tokens[i] = tok
		})
	}
	wg.Wait()
	entries, err := ReadTokens(dir)
	if err != nil || len(entries) != len(tokens) {
		t.Fatalf("%d entries, %v; want %d", len(entries), err, len(tokens))
	}
	path := filepath.Join(dir, TokensFile)
	b, _ := os.ReadFile(path)
	for _, tok := range tokens {
		if strings.Contains(string(b), tok) || strings.Contains(string(b), tok[len(TokenPrefix):]) {
			t.Fatal("the file holds a token, not its hash")
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if os.Geteuid() == 0 { // as `sudo nxdns token add` into a service's directory
		owned := t.TempDir()
		if err := os.Chown(owned, 4242, 4243); err != nil {
			t.Fatal(err)
		}
		if _, err := AddToken(owned, "svc", ScopeRead, 0, time.Now()); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(owned, TokensFile))
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 4242 || st.Gid != 4243 {
			t.Errorf("written by root into a directory of 4242:4243: owned by %d:%d, want the directory's owner", st.Uid, st.Gid)
		}
	}
	tt := NewTokens()
	tt.Configure(dir, false)
	if _, r := tt.check(tokens[0], time.Now()); r != TokenOK {
		t.Fatalf("a listed token: %s", r)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, r := tt.check(tokens[0], time.Now()); r != TokenUnreadable {
		t.Errorf("after the file was damaged: %s, want every token refused (%s)", r, TokenUnreadable)
	}
	if _, err := AddToken(dir, "Bad Name", ScopeRead, 0, time.Now()); err == nil {
		t.Error("a name with a space and capitals was accepted")
	}
	if _, err := AddToken(dir, "x", "admin", 0, time.Now()); err == nil {
		t.Error("scope admin was accepted")
	}
}

// An Authorization header of another scheme (Basic, from a reverse proxy
// with its own password in front of the dashboard, which passes the
// header on) is not a token: the request is judged by its session as any
// browser's, CSRF included, rather than every page answering 401.
func TestTokens_otherAuthorizationSchemeIsJudgedAsABrowser(t *testing.T) {
	s, _ := tokenServer(t)
	cookie, sess := s.login.Load().create()
	const loop = "127.0.0.1:4000"
	basic := map[string]string{"Authorization": "Basic YTpi", "Cookie": sessionCookie + "=" + cookie}
	if code, body := serveAs(s, "GET", "/api/private", loop, "", false, basic); code != 200 || body != sess.csrf {
		t.Errorf("Basic beside a live session: %d %q, want the session's page", code, body)
	}
	if code, body := serveAs(s, "POST", "/api/act", loop, "", false, basic); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("Basic beside a session, POST without the CSRF token: %d %q, want 403 CSRF", code, body)
	}
	if code, _ := serveAs(s, "GET", "/api/private", loop, "", false, map[string]string{"Authorization": "Basic YTpi"}); code != http.StatusUnauthorized {
		t.Errorf("Basic alone: %d, want 401", code)
	}
}

// A tokens file that cannot be read refuses every token, 503 saying why,
// counted as unreadable and logged once (docs/dashboard.md, "API tokens"):
// keeping the last good table would keep a token live that the operator
// revoked by editing the file and damaged it. Revoking through nxdns on a
// damaged file fails with the parse error, never half-writes. Once the
// file reads again the tokens it lists are judged by it: the revoked one
// refused, the live one let in.
func TestTokens_damagedFileRefusesEveryTokenUntilFixed(t *testing.T) {
	s, dir := tokenServer(t)
	core, logs := observer.New(zap.InfoLevel)
	s.tokens.log = zap.New(core)
	now := time.Now()
	keep, err := AddToken(dir, "keep", ScopeRead, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := AddToken(dir, "gone", ScopeRead, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	const loop = "127.0.0.1:4000"
	if code, _ := serveAs(s, "GET", "/api/private", loop, gone, false, nil); code != 200 {
		t.Fatalf("a live token: %d", code)
	}
	path := filepath.Join(dir, TokensFile)
	good, _ := os.ReadFile(path)
	// The operator revokes "gone" by hand and leaves the file damaged.
	if err := os.WriteFile(path, append(good[:len(good)/2:len(good)/2], "\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		for _, tok := range []string{keep, gone} {
			if code, body := serveAs(s, "GET", "/api/private", loop, tok, false, nil); code != http.StatusServiceUnavailable || !strings.Contains(body, "cannot be read") {
				t.Errorf("a token with the file damaged: %d %q, want 503 saying the file cannot be read", code, body)
			}
		}
	}
	if n := logs.FilterMessageSnippet("every token is refused").Len(); n != 1 {
		t.Errorf("%d log lines for the damaged file, want 1", n)
	}
	if err := RevokeToken(dir, "gone", now); err == nil {
		t.Error("revoking on a damaged file succeeded")
	}
	if b, _ := os.ReadFile(path); len(b) != len(good)/2+1 {
		t.Error("a failed revoke rewrote the damaged file")
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RevokeToken(dir, "gone", now); err != nil {
		t.Fatal(err)
	}
	if code, _ := serveAs(s, "GET", "/api/private", loop, gone, false, nil); code != http.StatusUnauthorized {
		t.Errorf("the revoked token once the file is fixed: %d, want 401", code)
	}
	if code, _ := serveAs(s, "GET", "/api/private", loop, keep, false, nil); code != 200 {
		t.Errorf("the live token once the file is fixed: %d, want 200", code)
	}
	if logs.FilterMessage("API tokens file readable again").Len() != 1 {
		t.Error("no log line when the file reads again")
	}
	var unreadable uint64
	for _, c := range s.tokens.Counts() {
		if c.Result == TokenUnreadable {
			unreadable += c.N
		}
	}
	if unreadable != 6 {
		t.Errorf("%d requests counted unreadable, want 6", unreadable)
	}
}
