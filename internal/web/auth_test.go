package web

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

const testPassword = "correct horse battery staple"

// loginServer is a server on the wildcard (reachable from the LAN, so only
// the login guards it) with a password, a Private route that echoes its
// CSRF token and a Mutating one.
func loginServer(t *testing.T) (s *Server, base string) {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s = newTestServer(t, "0.0.0.0:0")
	s.Handle("GET /api/private", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, CSRFToken(r))
	}), Private)
	s.Handle("GET /page", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") }), Private)
	s.Handle("POST /api/act", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") }), Mutating)
	s.SetPassword(hash)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s, "http://" + loopbackURLHost(t, s)
}

func browser(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func do(t *testing.T, c *http.Client, method, u string, body url.Values, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(body.Encode())
	}
	req, _ := http.NewRequest(method, u, r)
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

func TestLogin_sessionGuardsPrivateAndCSRFGuardsMutating(t *testing.T) {
	_, base := loginServer(t)
	c := browser(t)

	if resp, _ := do(t, c, "GET", base+"/api/private", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API without a session: %d, want 401", resp.StatusCode)
	}
	if resp, _ := do(t, c, "GET", base+"/page", nil, nil); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
		t.Fatalf("page without a session: %d %s, want a redirect to the login", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, open := range []string{"/metrics", "/api/health"} {
		if resp, _ := do(t, c, "GET", base+open, nil, nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s without a session: %d, want 200: it stays open", open, resp.StatusCode)
		}
	}
	if resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {"wrong"}}, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", resp.StatusCode)
	}
	resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {testPassword}, "next": {"/page"}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/page" {
		t.Fatalf("login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	cookie := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", sessionCookie + "="} {
		if !strings.Contains(cookie, want) {
			t.Errorf("cookie %q lacks %s", cookie, want)
		}
	}
	resp, csrf := do(t, c, "GET", base+"/api/private", nil, nil)
	if resp.StatusCode != http.StatusOK || len(csrf) != 64 {
		t.Fatalf("API with a session: %d, csrf %q", resp.StatusCode, csrf)
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", nil, http.StatusForbidden},
		{"wrong token", map[string]string{csrfHeader: strings.Repeat("0", 64)}, http.StatusForbidden},
		{"cross-origin", map[string]string{csrfHeader: csrf, "Origin": "http://evil.example"}, http.StatusForbidden},
		{"cross-site fetch", map[string]string{csrfHeader: csrf, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"token", map[string]string{csrfHeader: csrf}, http.StatusOK},
	} {
		if resp, _ := do(t, c, "POST", base+"/api/act", nil, tc.hdr); resp.StatusCode != tc.want {
			t.Errorf("mutating, %s: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
	// Logging out ends the session on the server, not only in this browser.
	stolen := c.Jar.Cookies(mustURL(t, base))
	if resp, _ := do(t, c, "POST", base+"/logout", nil, map[string]string{csrfHeader: csrf}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	replay := browser(t)
	replay.Jar.SetCookies(mustURL(t, base), stolen)
	if resp, _ := do(t, replay, "GET", base+"/api/private", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the logged-out session still works: %d", resp.StatusCode)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestLogin_attemptsAreRateLimited(t *testing.T) {
	_, base := loginServer(t)
	c := browser(t)
	for i := range loginBurst {
		if resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {"guess"}}, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d, want 401", i, resp.StatusCode)
		}
	}
	resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {testPassword}}, nil)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("attempt %d: %d, want 429 even with the right password", loginBurst+1, resp.StatusCode)
	}
}

// The login limiter keys on the client as the DNS path names it
// (query.ClientOf): the zones of one link-local host (fe80::1%eth0,
// fe80::1%eth1, fe80::1) share its bucket, so trying another interface does
// not buy more guesses. The peers are made up (loopback has no link-local
// address) and set as the requests' RemoteAddr, which is all the handler
// reads of them.
func TestLogin_zonesOfOneHostShareItsLimit(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, "127.0.0.1:0")
	s.SetPassword(hash)
	try := func(remote, password string) int { return tryLogin(s, remote, password) }
	for i := range loginBurst {
		if code := try("[fe80::1%eth0]:40000", "guess"); code != http.StatusUnauthorized {
			t.Fatalf("attempt %d from fe80::1%%eth0: %d, want 401", i, code)
		}
	}
	for _, remote := range []string{"[fe80::1%eth1]:40001", "[fe80::1]:40002"} {
		if code := try(remote, testPassword); code != http.StatusTooManyRequests {
			t.Errorf("attempt from %s after %d from fe80::1%%eth0: %d, want 429", remote, loginBurst, code)
		}
	}
	if code := try("192.0.2.7:40003", "guess"); code != http.StatusUnauthorized {
		t.Errorf("another host: %d, want 401: the limit is per client", code)
	}
}

// tryLogin posts password to s's login as if from remote (a made-up peer,
// set as RemoteAddr: loopback has one IPv6 address, and the handler reads
// nothing else of the connection).
func tryLogin(s *Server, remote, password string) int {
	form := url.Values{"password": {password}}.Encode()
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = remote
	w := httptest.NewRecorder()
	s.handleLogin(w, r)
	return w.Code
}

// The login limiter counts an IPv6 /64 as one client, as the connection
// caps and the DNS listeners do (query.ClientShareKey): a host that spent
// its guesses cannot buy more from another address of its /64, and so
// cannot spend the shared bucket alone and lock every other client out.
// Its refusals make one rate-limit warning, naming the /64. Before, each
// address had a bucket of its own: four addresses of one /64 took all
// globalBurst guesses and the operator's right password got 429.
func TestLogin_oneSlash64IsOneClient(t *testing.T) {
	s, logs := observedLoginServer(t)
	for i := range globalBurst {
		remote := fmt.Sprintf("[2001:db8:1:2::%x]:40000", i+1)
		code := tryLogin(s, remote, "guess")
		if want := http.StatusUnauthorized; i >= loginBurst {
			want = http.StatusTooManyRequests
			if code != want {
				t.Fatalf("guess %d from %s, after %d from its /64: %d, want %d", i, remote, loginBurst, code, want)
			}
		} else if code != want {
			t.Fatalf("guess %d from %s: %d, want %d", i, remote, code, want)
		}
	}
	if code := tryLogin(s, "192.0.2.7:40001", testPassword); code != http.StatusSeeOther {
		t.Errorf("the operator's right password after the /64's guesses: %d, want 303", code)
	}
	warns := logs.FilterMessageSnippet("rate-limited").All()
	if len(warns) != 1 || warns[0].ContextMap()["client"] != "2001:db8:1:2::/64" {
		t.Errorf("rate-limit warnings %v, want one naming 2001:db8:1:2::/64", warns)
	}
}

func TestLogin_nextStaysOnThisServer(t *testing.T) {
	for in, want := range map[string]string{
		"/queries?name=x": "/queries?name=x", "/": "/", "//evil.example/": "/", "https://evil.example": "/",
		"/\\evil": "/", "": "/", "/\t/evil.example": "/", "/\n/evil.example": "/", "/ /evil.example": "/",
		"/\u00a0/evil.example": "/", "/\u2028/evil.example": "/", "/\x7f/evil.example": "/", "/a\\b": "/",
		"/\xff/evil.example": "/", "evil.example": "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// /login?next=/%09/evil.example (issue 30 finding 15): the tab, which a
// browser drops from a Location, made the return path //evil.example. The
// right password now lands on "/", and the login page carries "/" too.
func TestLogin_encodedTabInNextDoesNotLeaveTheServer(t *testing.T) {
	_, base := loginServer(t)
	c := browser(t)
	if _, page := do(t, c, "GET", base+"/login?next=/%09/evil.example", nil, nil); !strings.Contains(page, `name="next" value="/"`) {
		t.Errorf("login page keeps a next other than /:\n%s", page)
	}
	for _, next := range []string{"/\t/evil.example", "/\\/evil.example", "//evil.example"} {
		resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {testPassword}, "next": {next}}, nil)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/" {
			t.Errorf("next %q: %d Location %q, want 303 to /", next, resp.StatusCode, loc)
		}
	}
	resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {testPassword}, "next": {"/queries?client=a"}}, nil)
	if loc := resp.Header.Get("Location"); loc != "/queries?client=a" {
		t.Errorf("a path on this server: Location %q, want it kept", loc)
	}
}

func TestLoadPasswordFile(t *testing.T) {
	dir := t.TempDir()
	hash, err := HashPassword([]byte("pw-long-enough"))
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte(hash+"\n"), 0o600)
	if h, err := LoadPasswordFile(good); err != nil || bcrypt.CompareHashAndPassword(h, []byte("pw-long-enough")) != nil {
		t.Fatalf("good file: %v", err)
	}
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("hunter2\n"), 0o600)
	huge := filepath.Join(dir, "huge")
	os.WriteFile(huge, make([]byte, 1<<20), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"a plain password": plain, "a huge file": huge, "a directory": dir, "missing": filepath.Join(dir, "none"), "a FIFO (must not hang)": fifo, "a device": "/dev/zero"} {
		if _, err := LoadPasswordFile(path); err == nil || !strings.Contains(err.Error(), "web.password_file") {
			t.Errorf("%s: %v, want a web.password_file error", name, err)
		}
	}
	if _, err := HashPassword(make([]byte, 73)); err == nil {
		t.Error("a 73-byte password was hashed: bcrypt would ignore its end")
	}
}

func TestLogin_hugeFormIsRefusedUnread(t *testing.T) {
	_, base := loginServer(t)
	c := browser(t)
	resp, _ := do(t, c, "POST", base+"/login", url.Values{"password": {strings.Repeat("x", 1<<20)}}, nil)
	if resp.StatusCode == http.StatusSeeOther {
		t.Fatalf("a 1 MB form logged in")
	}
	if resp, _ := do(t, c, "GET", base+"/api/private", nil, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after a huge form: %d", resp.StatusCode)
	}
}
