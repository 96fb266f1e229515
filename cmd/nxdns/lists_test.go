package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// `nxdns lists refresh` logs in to the running binary with the password
// on stdin and has it download its list now: the new copy's rule count is
// printed; a wrong password and an unknown list exit 1 saying why.
func TestListsRefresh_downloadsNowThroughTheLogin(t *testing.T) {
	var mu sync.Mutex
	body := "0.0.0.0 v1.example\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, body)
	}))
	defer srv.Close()

	dir := t.TempDir()
	var hash, errb strings.Builder
	if code := cmdHashPassword(nil, strings.NewReader("long enough\n"), &hash, &errb); code != exitOK {
		t.Fatal(errb.String())
	}
	pw := filepath.Join(dir, "web-password")
	writeConfig(t, pw, hash.String())
	cfg, _ := loopbackConfigWith(t, fmt.Sprintf("password_file = %q", pw),
		fmt.Sprintf("state_dir = %q\n[[filter.lists]]\nname = \"remote\"\nurl = %q", dir, srv.URL+"/list.txt"))
	path := filepath.Join(dir, "nxdns.toml")
	writeConfig(t, path, cfg)
	_, stderr := startRun(t, "--config", path)
	awaitLine(t, lineChan(stderr), "web server listening")

	mu.Lock()
	body = "0.0.0.0 v1.example\n0.0.0.0 v2.example\n0.0.0.0 v3.example\n"
	mu.Unlock()
	refresh := func(password string, args ...string) (string, int) {
		cmd := exec.Command(binary, append([]string{"lists", "refresh", "--config", path}, args...)...)
		cmd.Stdin = strings.NewReader(password + "\n")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	if out, code := refresh("long enough"); code != exitOK || !strings.Contains(out, "remote: ok, 3 rules") {
		t.Fatalf("refresh: exit %d %q, want the new copy's 3 rules", code, out)
	}
	if out, code := refresh("long enough", "--name", "nope"); code != exitProblems || !strings.Contains(out, "not a list with a url") {
		t.Errorf("an unknown list: exit %d %q", code, out)
	}
	if out, code := refresh("wrong password"); code != exitProblems || !strings.Contains(out, "wrong password") {
		t.Errorf("a wrong password: exit %d %q", code, out)
	}
}
