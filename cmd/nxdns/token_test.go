package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tokenRequest sends method path to the binary's web port with
// "Authorization: Bearer token" and a session cookie that is not one, and
// returns the status and body.
func tokenRequest(t *testing.T, port uint16, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Through the binary, with a password set (so only a login or a token gets
// in): `nxdns token add` prints a token a running nxdns accepts at once; a
// read token reads the overview and the query log but is refused pausing
// (403, scope), a control token pauses filtering; neither reaches the
// tokens page; a wrong token is 401; `nxdns token revoke` takes effect
// without a reload; every outcome is counted per token name, and no token
// reaches the log.
func TestRun_tokenOnlyClientPausesAndReadsWithinItsScope(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	mkdir(t, stateDir)
	pwFile := filepath.Join(dir, "web-password")
	var hash, errb strings.Builder
	if code := cmdHashPassword(nil, strings.NewReader("long enough\n"), &hash, &errb); code != exitOK {
		t.Fatal(errb.String())
	}
	writeConfig(t, pwFile, hash.String())
	cfg, port := loopbackConfigWith(t, fmt.Sprintf("password_file = %q", pwFile), fmt.Sprintf("state_dir = %q", stateDir))
	path := filepath.Join(dir, "nxdns.toml")
	writeConfig(t, path, cfg)
	_, stderr := startRun(t, "--config", path)
	lines := lineChan(stderr)
	awaitLine(t, lines, "web server listening")

	add := func(name, scope string) string {
		out, code := nxdnsOut(t, "token", "add", name, "--scope", scope, "--config", path)
		if code != exitOK || !strings.HasPrefix(out, "nxdns_") {
			t.Fatalf("nxdns token add %s: exit %d, %q", name, code, out)
		}
		return strings.TrimSpace(out)
	}
	ha, ro := add("ha", "control"), add("ro", "read")

	if code, body := tokenRequest(t, port, "GET", "/api/overview", ro); code != http.StatusOK {
		t.Errorf("read token, GET /api/overview: %d %s", code, body)
	}
	if code, body := tokenRequest(t, port, "GET", "/api/queries", ro); code != http.StatusOK {
		t.Errorf("read token, GET /api/queries: %d %s", code, body)
	}
	if code, body := tokenRequest(t, port, "POST", "/api/filter/pause?minutes=60", ro); code != http.StatusForbidden || !strings.Contains(body, "needs control") {
		t.Errorf("read token, POST /api/filter/pause: %d %s, want 403 naming the scope", code, body)
	}
	code, body := tokenRequest(t, port, "POST", "/api/filter/pause?minutes=60", ha)
	var paused struct{ Paused bool }
	if json.Unmarshal([]byte(body), &paused); code != http.StatusOK || !paused.Paused {
		t.Errorf("control token, POST /api/filter/pause: %d %s, want paused", code, body)
	}
	if code, body := tokenRequest(t, port, "GET", "/tokens", ha); code != http.StatusForbidden {
		t.Errorf("control token, GET /tokens: %d %s, want 403 (tokens cannot manage tokens)", code, body)
	}
	if code, body := tokenRequest(t, port, "GET", "/api/overview", "nxdns_"+strings.Repeat("0", 64)); code != http.StatusUnauthorized || !strings.Contains(body, "unknown API token") {
		t.Errorf("wrong token: %d %s, want 401", code, body)
	}
	if out, code := nxdnsOut(t, "token", "revoke", "ha", "--state-dir", stateDir); code != exitOK {
		t.Fatalf("nxdns token revoke: %d %s", code, out)
	}
	if code, body := tokenRequest(t, port, "POST", "/api/filter/resume", ha); code != http.StatusUnauthorized || !strings.Contains(body, "revoked") {
		t.Errorf("revoked token: %d %s, want 401 saying revoked", code, body)
	}
	// nxdns export through the running instance's API with the read token
	// (its history file is held by the running nxdns).
	tokenFile := filepath.Join(dir, "ro.token")
	writeConfig(t, tokenFile, ro+"\n")
	if out, code := nxdnsOut(t, "export", "--url", fmt.Sprintf("http://127.0.0.1:%d", port), "--token-file", tokenFile, "--format", "csv"); code != exitOK || !strings.HasPrefix(out, "time,client,") {
		t.Errorf("nxdns export --url with the read token: exit %d, %q", code, out)
	}
	if out, code := nxdnsOut(t, "export", "--url", fmt.Sprintf("http://127.0.0.1:%d", port)); code != exitProblems || !strings.Contains(out, "401") {
		t.Errorf("nxdns export --url without a token: exit %d, %q, want 1 naming the 401", code, out)
	}
	out, _ := nxdnsOut(t, "token", "list", "--state-dir", stateDir)
	if !regexp.MustCompile(`(?m)^ha\s+control\s+\S+\s+revoked`).MatchString(out) || !regexp.MustCompile(`(?m)^ro\s+read\s+\S+\s+live`).MatchString(out) {
		t.Errorf("nxdns token list:\n%s", out)
	}

	metrics := scrapeAll(t, port)
	for series, want := range map[string]string{
		`nxdns_web_api_token_requests_total{result="ok",token="ro"}`:           "3",
		`nxdns_web_api_token_requests_total{result="scope",token="ro"}`:        "1",
		`nxdns_web_api_token_requests_total{result="ok",token="ha"}`:           "1",
		`nxdns_web_api_token_requests_total{result="scope",token="ha"}`:        "1",
		`nxdns_web_api_token_requests_total{result="revoked",token="ha"}`:      "1",
		`nxdns_web_api_token_requests_total{result="unknown",token="unknown"}`: "1",
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ` + want + `$`).MatchString(metrics) {
			t.Errorf("/metrics lacks %s %s", series, want)
		}
	}
	// Lines logged so far: none carries a token.
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, ha[len("nxdns_"):]) || strings.Contains(l, ro[len("nxdns_"):]) {
				t.Errorf("a token in the log: %s", l)
			}
			continue
		default:
		}
		break
	}
}

// nxdnsOut runs the binary and returns its stdout alone and exit code.
func nxdnsOut(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("nxdns %v: %v", args, err)
	}
	if cmd.ProcessState.ExitCode() != 0 {
		return string(out) + stderr.String(), cmd.ProcessState.ExitCode()
	}
	return string(out), 0
}

func scrapeAll(t *testing.T, port uint16) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}
