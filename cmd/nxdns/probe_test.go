package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestCheckProbe_certificateFailureSaysWhatToDo: a DoT upstream whose CA the
// file does not name is reported with the fix (set ca_file), then the raw
// error; with ca_file set the same upstream probes ok (issue 16, finding 16).
func TestCheckProbe_certificateFailureSaysWhatToDo(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("[[upstreams]]\nurl = \"tls://%s\"\ntls_name = \"dot.test\"\n", srv.Addr)

	out, code := nxdns(t, "check", "--probe", "--config", writeFile(t, dir, "no-ca.toml", base))
	if code != exitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"FAILED: certificate signed by unknown authority: set ca_file", "detail: ", "x509"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}

	out, code = nxdns(t, "check", "--probe", "--config", writeFile(t, dir, "ca.toml", base+fmt.Sprintf("ca_file = %q\n", caFile)))
	if code != exitOK || !strings.Contains(out, ": ok (") {
		t.Fatalf("with ca_file: exit %d:\n%s", code, out)
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCheckProbe_probesForwardZones: --probe asks each forward zone's
// resolver too; a dead one fails the check and is named (finding 18).
func TestCheckProbe_probesForwardZones(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0") // bound, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	text := fmt.Sprintf("[[upstreams]]\nurl = \"tls://%s\"\ntls_name = \"dot.test\"\nca_file = %q\n"+
		"[[forward_zones]]\nzone = \"lan\"\nresolver = \"udp://%s\"\n", srv.Addr, caFile, silent.LocalAddr())
	out, code := nxdns(t, "check", "--probe", "--config", writeFile(t, dir, "zone.toml", text))
	if code != exitProblems {
		t.Fatalf("exit %d, want 1 (the zone's resolver is silent):\n%s", code, out)
	}
	want := fmt.Sprintf("probe zone lan. udp://%s: FAILED: ", silent.LocalAddr())
	if !strings.Contains(out, want) || !strings.Contains(out, "tls://"+srv.Addr.String()+": ok") {
		t.Errorf("output lacks %q or the upstream's ok line:\n%s", want, out)
	}
}
