package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

// startWeb runs the binary with a loopback DNS and web listener (no
// password) plus the extra [web] lines, and returns the web port once it
// serves.
func startWeb(t *testing.T, webExtra string) uint16 {
	t.Helper()
	cfg, port := loopbackConfigWith(t, webExtra, "")
	path := filepath.Join(t.TempDir(), "nxdns.toml")
	writeConfig(t, path, cfg)
	_, stderr := startRun(t, "--config", path)
	awaitLine(t, lineChan(stderr), "web server listening")
	return port
}

// request sends method path to the binary's web port with the given Host
// header, as a browser does for a name that resolves to 127.0.0.1.
func request(t *testing.T, port uint16, method, host, path string) (int, string) {
	t.Helper()
	return testutil.HTTPWithHost(t, method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), host)
}

// DNS rebinding (issue 30 finding 10): with no password on a loopback
// web.listen, a request naming a foreign host — what a page that made its
// own name resolve to 127.0.0.1 sends — cannot read the history or pause
// filtering; the listen address, localhost and a web.hostnames name can.
func TestRun_webRefusesForeignHost(t *testing.T) {
	port := startWeb(t, `hostnames = ["nxdns.home.arpa"]`)
	foreign := fmt.Sprintf("rebind.example:%d", port)
	for _, r := range [][2]string{{"GET", "/api/queries"}, {"POST", "/api/filter/pause"}, {"GET", "/"}} {
		code, body := request(t, port, r[0], foreign, r[1])
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "web.hostnames") {
			t.Errorf("%s %s with Host %s: %d %q, want 421 naming web.hostnames", r[0], r[1], foreign, code, body)
		}
	}
	for _, host := range []string{fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("localhost:%d", port), fmt.Sprintf("nxdns.home.arpa:%d", port)} {
		if code, body := request(t, port, "GET", host, "/api/queries"); code != http.StatusOK {
			t.Errorf("GET /api/queries with Host %s: %d %q, want 200", host, code, body)
		}
	}
}

// With [tls] holding a certificate and web.tls_listen set, the binary
// serves the dashboard and its API over HTTPS with that certificate (issue
// 30 finding 20: plain HTTP only), beside plain HTTP on web.listen.
func TestRun_webServesHTTPSWithTheTLSCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t)
	leaf, err := ca.Issue("nxdns.home.arpa")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := certs.WriteLeafFiles(leaf, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	tlsPort := testutil.FreePort(t)
	port := startWeb(t, fmt.Sprintf("tls_listen = \"127.0.0.1:%d\"\nhostnames = [\"nxdns.home.arpa\"]\n[tls]\ncert_file = %q\nkey_file = %q", tlsPort, certFile, keyFile))
	// As a browser asks: HTTP/2 offered in the handshake; nxdns answers in
	// HTTP/1.1.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "nxdns.home.arpa"}}}
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/api/queries", tlsPort), nil)
	req.Host = "nxdns.home.arpa"
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("HTTPS on web.tls_listen, checked against the CA: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 1 {
		t.Errorf("GET /api/queries over HTTPS: %s %d, want HTTP/1.1 200", resp.Proto, resp.StatusCode)
	}
	if code, body := request(t, port, "GET", fmt.Sprintf("127.0.0.1:%d", port), "/api/queries"); code != http.StatusOK {
		t.Errorf("plain HTTP beside it: %d %q", code, body)
	}
}

// passwordRun is the binary serving a loopback web.listen with a password.
type passwordRun struct {
	cmd    *exec.Cmd
	port   uint16        // web.listen's
	lines  <-chan string // stderr, past "web server listening"
	pwFile string        // web.password_file
	hash   string        // its content
}

// startWithPassword runs the binary with a loopback web.listen and a
// password file in dir, plus args.
func startWithPassword(t *testing.T, dir, password string, args ...string) passwordRun {
	t.Helper()
	var hash, errb strings.Builder
	if code := cmdHashPassword(nil, strings.NewReader(password+"\n"), &hash, &errb); code != exitOK {
		t.Fatal(errb.String())
	}
	r := passwordRun{pwFile: filepath.Join(dir, "web-password"), hash: hash.String()}
	writeConfig(t, r.pwFile, r.hash)
	cfg, port := loopbackConfigWith(t, fmt.Sprintf("password_file = %q", r.pwFile), "")
	path := filepath.Join(dir, "nxdns.toml")
	writeConfig(t, path, cfg)
	cmd, stderr := startRun(t, append([]string{"--config", path}, args...)...)
	r.cmd, r.port, r.lines = cmd, port, lineChan(stderr)
	awaitLine(t, r.lines, "web server listening")
	return r
}

// Through the binary: /login?next=/%09/evil.example keeps the browser on
// this server (issue 30 finding 15), and 60 refused login attempts make one
// warning, not 60, with every one counted (finding 17).
func TestRun_loginStaysHomeAndLogsRateLimitingOnce(t *testing.T) {
	r := startWithPassword(t, t.TempDir(), "long enough")
	cmd, port, lines := r.cmd, r.port, r.lines
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	noFollow := &http.Client{Transport: &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.PostForm(base+"/login", url.Values{"password": {"long enough"}, "next": {"/\t/evil.example"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/" {
		t.Errorf("login with next=/%%09/evil.example: %d Location %q, want 303 to /", resp.StatusCode, loc)
	}
	refused := 0
	for range 65 {
		resp, err := noFollow.PostForm(base+"/login", url.Values{"password": {"wrong guess"}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			refused++
		}
	}
	if refused < 55 {
		t.Fatalf("%d of 65 wrong guesses refused by the rate limit, want most", refused)
	}
	if v := scrapeCounter(t, port, "nxdns_web_login_rate_limited_total"); v != float64(refused) {
		t.Errorf("nxdns_web_login_rate_limited_total %v, want %d", v, refused)
	}
	// A reload's line comes after every line the attempts made (one
	// ordered log): count the warnings up to it.
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	warnings := 0
	for l := range lines {
		if strings.Contains(l, "rate-limited") {
			warnings++
		}
		if strings.Contains(l, "reload") { // reloaded, or a failure: either ends the wait
			break
		}
	}
	if warnings != 1 {
		t.Errorf("%d rate-limit warnings for %d refused attempts, want 1", warnings, refused)
	}
}
