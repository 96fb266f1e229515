package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/certs"
)

// nxdnsEnv runs the binary with extra environment (SSL_CERT_FILE makes a
// test CA the "system roots" Go reads, as an operator's trust store would).
func nxdnsEnv(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if _, isExit := err.(*exec.ExitError); err != nil && !isExit {
		t.Fatalf("nxdns %v: %v", args, err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestCheckTLS_saysWhetherAndroidAccepts(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(60*24*time.Hour), "dns.home.example.org")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, caFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "key.pem"), filepath.Join(dir, "roots.pem")
	if err := certs.WriteLeafFiles(leaf, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(dir, "other-roots.pem")
	if err := os.WriteFile(otherFile, other.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nxdns.toml")
	text := fmt.Sprintf("[[upstreams]]\nurl = \"tls://9.9.9.9\"\n[tls]\ncert_file = %q\nkey_file = %q\ndot_listen = [\"127.0.0.1:853\"]\n", certFile, keyFile)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "no-roots")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	noDirs := "SSL_CERT_DIR=" + empty // Go reads every file of the directory: only SSL_CERT_FILE counts

	out, code := nxdnsEnv(t, []string{"SSL_CERT_FILE=" + caFile, noDirs}, "check", "--config", conf, "--tls", "--tls-name", "dns.home.example.org")
	if code != exitOK || !strings.Contains(out, "Private DNS will accept") {
		t.Fatalf("trusted, covered, valid: exit %d\n%s", code, out)
	}
	out, code = nxdnsEnv(t, []string{"SSL_CERT_FILE=" + otherFile, noDirs}, "check", "--config", conf, "--tls", "--tls-name", "dns.home.example.org")
	if code != exitProblems || !strings.Contains(out, "not issued by a public CA") || !strings.Contains(out, "will refuse") {
		t.Fatalf("untrusted CA: exit %d\n%s", code, out)
	}
	out, code = nxdnsEnv(t, []string{"SSL_CERT_FILE=" + caFile, noDirs}, "check", "--config", conf, "--tls", "--tls-name", "nas.home.example.org")
	if code != exitProblems || !strings.Contains(out, "not nas.home.example.org") {
		t.Fatalf("name not covered: exit %d\n%s", code, out)
	}
	out, code = nxdns(t, "check", "--tls")
	if code != exitProblems || !strings.Contains(out, "cert_file and key_file are not set") {
		t.Fatalf("no [tls]: exit %d\n%s", code, out)
	}
}
