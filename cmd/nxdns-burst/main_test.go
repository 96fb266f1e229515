package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"go.uber.org/goleak"

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
