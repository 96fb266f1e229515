package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun_usageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"-h"}, exitOK},
		{"unknown flag", []string{"-target", "127.0.0.1:53", "-bogus"}, exitUsage},
		{"no target", nil, exitUsage},
		{"target without port", []string{"-target", "127.0.0.1"}, exitUsage},
		{"positional argument", []string{"-target", "127.0.0.1:53", "extra"}, exitUsage},
		{"bad type", []string{"-target", "127.0.0.1:53", "-type", "AAAAA"}, exitUsage},
		{"bad duration", []string{"-target", "127.0.0.1:53", "-timeout", "5"}, exitUsage},
		{"n zero", []string{"-target", "127.0.0.1:53", "-n", "0"}, exitUsage},
		{"rate without duration", []string{"-target", "127.0.0.1:53", "-rate", "10"}, exitUsage},
		{"duration without rate", []string{"-target", "127.0.0.1:53", "-duration", "1s"}, exitUsage},
		{"rate with a wave flag", []string{"-target", "127.0.0.1:53", "-rate", "10", "-duration", "1s", "-waves", "2"}, exitUsage},
		{"unknown proto", []string{"-target", "127.0.0.1:53", "-proto", "quic"}, exitUsage},
		{"ca-file over udp", []string{"-target", "127.0.0.1:53", "-ca-file", "/ca.pem"}, exitUsage},
		{"tcp with doq", []string{"-target", "127.0.0.1:853", "-proto", "doq", "-tcp"}, exitUsage},
		{"duration past the bound", []string{"-target", "127.0.0.1:53", "-rate", "1", "-duration", "11m"}, exitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.args, &stdout, &stderr); got != tt.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tt.want, &stderr)
			}
			if tt.want == exitUsage && stderr.Len() == 0 {
				t.Error("usage error with nothing on stderr")
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q, want nothing", &stdout)
			}
		})
	}
}

// A run against a refusing upstream completes: exit 0 and exactly one JSON
// object, the REFUSED answers counted in it.
func TestRun_printsOneReport(t *testing.T) {
	l, err := fakeup.ParseListen("udp://127.0.0.1:0?refuse=1")
	if err != nil {
		t.Fatal(err)
	}
	up, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	var stdout, stderr bytes.Buffer
	args := []string{"-target", up.Listeners()[0].Addr.String(), "-n", "7", "-baseline", "2", "-type", "aaaa"}
	if got := run(args, &stdout, &stderr); got != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", got, &stderr)
	}
	if strings.Count(stdout.String(), "\n") != 1 {
		t.Fatalf("stdout %q, want one line", &stdout)
	}
	var rep struct {
		Queries int            `json:"queries"`
		Rcodes  map[string]int `json:"rcodes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Queries != 7 || rep.Rcodes["REFUSED"] != 7 {
		t.Errorf("report %s, want 7 queries all REFUSED", &stdout)
	}
}

// -proto dot with -ca-file and -tls-name reaches the upstream over one
// verified connection in fixed-rate mode; without the CA the dial fails
// before any query: exit 1, the reason on stderr.
func TestRun_protoDoTFlags(t *testing.T) {
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := ca.WriteFiles(caFile, filepath.Join(dir, "ca.key")); err != nil {
		t.Fatal(err)
	}
	l, err := fakeup.ParseListen("dot://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca, CertNames: []string{"dns.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	target := up.Listeners()[0].Addr.String()

	var stdout, stderr bytes.Buffer
	args := []string{"-target", target, "-proto", "dot", "-tls-name", "dns.test", "-rate", "50", "-duration", "200ms", "-baseline", "0", "-distinct", "2"}
	if got := run(args, &stdout, &stderr); got != exitFail || !strings.Contains(stderr.String(), "certificate") {
		t.Errorf("without -ca-file: exit %d, stderr %q; want 1 and a certificate error", got, &stderr)
	}
	stdout.Reset()
	stderr.Reset()
	if got := run(append(args, "-ca-file", caFile), &stdout, &stderr); got != exitOK {
		t.Fatalf("exit %d, want 0; stderr:\n%s", got, &stderr)
	}
	var rep struct {
		Rcodes map[string]int `json:"rcodes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	// Two connections: the one the client rejected mid-handshake, and the
	// one every query shared.
	if c := up.Counters(); rep.Rcodes["NOERROR"] != 10 || c.Handshakes != 1 || c.Queries != 10 {
		t.Errorf("rcodes %v; upstream saw %d queries after %d handshakes; want 10 NOERROR, 10 queries after 1 handshake", rep.Rcodes, c.Queries, c.Handshakes)
	}
}
