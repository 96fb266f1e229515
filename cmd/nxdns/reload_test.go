package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/testutil"
)

// loopbackConfigWith is a loopback configuration (DNS and web on free
// ports, an upstream nobody serves) plus extra lines at the top level and
// in [web] and [filter]; it returns the text and the web port.
func loopbackConfigWith(t *testing.T, webExtra, filterExtra string) (string, uint16) {
	t.Helper()
	p := freePorts(t, 3)
	return fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
[web]
listen = "127.0.0.1:%d"
%s
[filter]
%s
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "dot.test"
`, p[0], p[1], webExtra, filterExtra, p[2]), p[1]
}

// freePorts is n free loopback ports, distinct (testutil.FreePort).
func freePorts(t *testing.T, n int) []uint16 {
	t.Helper()
	ports := make([]uint16, n)
	for i := range ports {
		ports[i] = testutil.FreePort(t)
	}
	return ports
}

func writeConfig(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// `nxdns check` reads what the daemon reads (issue 30 finding 3): a
// web.password_file that is missing or holds no hash, and inline rules the
// list parser does not take, fail it with the parser's reason, where they
// passed before and the reload then failed or the rule did nothing.
func TestCheck_failsWhatTheDaemonRejectsOrIgnores(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	writeConfig(t, plain, "not a hash\n")
	for name, c := range map[string]struct {
		web, filter, top string
		want             []string
	}{
		"missing password file":  {web: fmt.Sprintf("password_file = %q", filepath.Join(dir, "none")), want: []string{"web.password_file", "no such file"}},
		"password file, no hash": {web: fmt.Sprintf("password_file = %q", plain), want: []string{"web.password_file", "bcrypt"}},
		"pi-hole regex without slashes": {filter: `block = ['^ads[0-9]+\.example$']`,
			want: []string{"filter.block[0]", "between slashes"}},
		"url rule": {filter: `block = ["ok.example", "||ads.example^/path"]`, want: []string{"filter.block[1]", "url rule"}},
		"allow":    {filter: `allow = ["not a rule at all"]`, want: []string{"filter.allow[0]", "no rule format"}},
		"tls pair missing": {top: fmt.Sprintf("[tls]\ncert_file = %q\nkey_file = %q\n", filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")),
			want: []string{"tls.cert_file", "no such file"}},
	} {
		text, _ := loopbackConfigWith(t, c.web, c.filter)
		text += c.top
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".toml")
		writeConfig(t, path, text)
		out, code := nxdns(t, "check", "--files", "--config", path)
		if code != exitProblems {
			t.Errorf("%s: exit %d, want %d\n%s", name, code, exitProblems, out)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", name, w, out)
			}
		}
	}
	text, _ := loopbackConfigWith(t, "", `block = ["ads.example", "||ads2.example^", '/^ads[0-9]+\.example$/']`)
	good := filepath.Join(dir, "good.toml")
	writeConfig(t, good, text)
	if out, code := nxdns(t, "check", "--files", "--config", good); code != exitOK {
		t.Errorf("rules every format of which is taken: exit %d\n%s", code, out)
	}
	// Without --files (a system build, where the credential does not exist
	// yet) the files are not read; the rules still are.
	missing, _ := loopbackConfigWith(t, fmt.Sprintf("password_file = %q", filepath.Join(dir, "none")), `block = ["||ads.example^/path"]`)
	writeConfig(t, good, missing)
	out, code := nxdns(t, "check", "--config", good)
	if code != exitProblems || strings.Contains(out, "web.password_file") || !strings.Contains(out, "filter.block[0]") {
		t.Errorf("without --files: exit %d, want %d for the rule and nothing about the password file:\n%s", code, exitProblems, out)
	}
}

// health reads /api/health's problems.
func healthProblems(t *testing.T, port uint16) []string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/health", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Problems []string `json:"problems"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h.Problems
}

// `nxdns reload` (the unit's ExecReload) fails when the daemon rejects the
// reload — here a web.password_file that went missing, which the daemon
// finds only when it reads it — and succeeds when it applies one; the
// failure stays in nxdns_config_last_reload_successful and /api/health
// until a good reload (issue 30 finding 3: `systemctl reload` said
// "Reloaded" while the journal said "reload failed").
func TestReload_commandFailsWhenTheDaemonRejects(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "reload-status")
	r := startWithPassword(t, dir, "long enough", "--reload-status", status)
	pw, port := r.pwFile, r.port
	pid := fmt.Sprint(r.cmd.Process.Pid)

	if out, code := nxdns(t, "reload", "--pid", pid, "--status", status); code != exitOK || !strings.Contains(out, "reloaded") {
		t.Fatalf("reload of an unchanged file: exit %d %q", code, out)
	}
	if err := os.Remove(pw); err != nil {
		t.Fatal(err)
	}
	out, code := nxdns(t, "reload", "--pid", pid, "--status", status)
	if code != exitProblems || !strings.Contains(out, "web.password_file") {
		t.Fatalf("reload with the password file gone: exit %d %q, want %d naming web.password_file", code, out, exitProblems)
	}
	if v := scrapeCounter(t, port, "nxdns_config_last_reload_successful"); v != 0 {
		t.Errorf("nxdns_config_last_reload_successful %v after a failed reload, want 0", v)
	}
	if ps := healthProblems(t, port); !strings.Contains(strings.Join(ps, "\n"), "last reload failed") {
		t.Errorf("/api/health problems %q lack the failed reload", ps)
	}
	writeConfig(t, pw, r.hash)
	if out, code := nxdns(t, "reload", "--pid", pid, "--status", status); code != exitOK {
		t.Fatalf("reload with the file back: exit %d %q", code, out)
	}
	if v := scrapeCounter(t, port, "nxdns_config_last_reload_successful"); v != 1 {
		t.Errorf("nxdns_config_last_reload_successful %v after a good reload, want 1", v)
	}
	if ps := healthProblems(t, port); strings.Contains(strings.Join(ps, "\n"), "reload") {
		t.Errorf("/api/health problems %q still name a reload after a good one", ps)
	}
}

// An inline rule the list parser does not take is skipped by the daemon
// with a warning that says why (issue 30 finding 3: the warning had no
// reason).
func TestRun_skippedInlineRuleSaysWhy(t *testing.T) {
	text, _ := loopbackConfigWith(t, "", `block = ["||ads.example^/path"]`)
	path := filepath.Join(t.TempDir(), "nxdns.toml")
	writeConfig(t, path, text)
	_, stderr := startRun(t, "--config", path)
	awaitLine(t, lineChan(stderr), `"reason": "url rule: DNS sees names, not URLs or paths`)
}

// `nxdns reload` (the units' ExecReload) waits longer by default than a
// reload can take checking a history file in a child process
// (history.CheckTimeout), and less than systemd's default reload timeout
// of 90 s. It waited 60 s, the check's own bound: a reload that re-checked
// a slow file was reported failed though nxdns then applied it.
func TestReload_waitsOutAHistoryCheck(t *testing.T) {
	out, _ := nxdns(t, "reload", "-h")
	m := regexp.MustCompile(`-timeout duration\s+.*\(default ([^)]+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no default for -timeout in:\n%s", out)
	}
	wait, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if wait <= history.CheckTimeout || wait >= 90*time.Second {
		t.Errorf("reload waits %v by default, want more than the history check's %v and less than systemd's 90 s", wait, history.CheckTimeout)
	}
}

// `nxdns check --files` run as the service's user (here nobody, as the
// .deb's dynamic user would be) on a password file only root can read says
// it cannot read it and how to give the service access (issue 33: `chmod
// 600` silently locked the dashboard).
func TestCheckFiles_saysWhenTheServiceUserCannotReadThePassword(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the check as another user")
	}
	dir, err := os.MkdirTemp("", "nxdns-perm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "nxdns")
	b, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var hash, errb strings.Builder
	if code := cmdHashPassword(nil, strings.NewReader("long enough\n"), &hash, &errb); code != exitOK {
		t.Fatal(errb.String())
	}
	pw := filepath.Join(dir, "web-password")
	if err := os.WriteFile(pw, []byte(hash.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := loopbackConfigWith(t, fmt.Sprintf("password_file = %q", pw), "")
	path := filepath.Join(dir, "nxdns.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "check", "--files", "--config", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitProblems || !strings.Contains(string(out), "permission denied") || !strings.Contains(string(out), "chgrp nxdns") {
		t.Fatalf("check --files as nobody: exit %d %q, want %d saying it cannot read the file and how to fix it", code, out, exitProblems)
	}
}
