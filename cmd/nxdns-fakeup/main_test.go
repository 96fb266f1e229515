package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/certs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun_usageErrors(t *testing.T) {
	dir := t.TempDir()
	ca := []string{"-ca-cert", filepath.Join(dir, "ca.pem"), "-ca-key", filepath.Join(dir, "ca.key")}
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"-h"}, exitOK},
		{"unknown flag", []string{"-listen", "udp://127.0.0.1:0", "-bogus"}, exitUsage},
		{"no listener", nil, exitUsage},
		{"positional argument", []string{"-listen", "udp://127.0.0.1:0", "extra"}, exitUsage},
		{"bad listen URL", []string{"-listen", "udp://127.0.0.1:0?latncy=1ms"}, exitUsage},
		{"dot without a CA", []string{"-listen", "dot://127.0.0.1:0"}, exitUsage},
		{"cert without key", []string{"-listen", "dot://127.0.0.1:0", "-ca-cert", "x.pem"}, exitUsage},
		{"ttl too large", []string{"-listen", "udp://127.0.0.1:0", "-ttl", "4294967295"}, exitUsage},
		{"empty cert name", append([]string{"-listen", "dot://127.0.0.1:0", "-cert-names", "a,,b"}, ca...), exitUsage},
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

func TestRun_bindFailureExits1(t *testing.T) {
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stdout, stderr bytes.Buffer
	if got := run([]string{"-listen", "udp://" + busy.LocalAddr().String()}, &stdout, &stderr); got != exitFail {
		t.Errorf("exit %d, want %d; stderr:\n%s", got, exitFail, &stderr)
	}
}

// started runs the command in the background and waits for its start-up
// lines on stderr; it returns them and a channel with the exit status.
func started(t *testing.T, run func(args []string, stdout, stderr io.Writer) int, args []string, stdout io.Writer, lines int) ([]string, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	exit := make(chan int, 1)
	go func() {
		exit <- run(args, stdout, pw)
		pw.Close()
	}()
	got := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		var out []string
		for len(out) < lines && sc.Scan() {
			out = append(out, sc.Text())
		}
		got <- out
		io.Copy(io.Discard, pr) // keep later lines from blocking the writer
	}()
	select {
	case out := <-got:
		if len(out) < lines {
			t.Fatalf("start-up lines %q, want %d", out, lines)
		}
		return out, exit
	case <-time.After(10 * time.Second):
		t.Fatal("no start-up lines")
	}
	return nil, nil
}

// The command writes a CA where none is, serves, and on SIGTERM closes
// everything (a stalled connection too) and prints its counters as one JSON
// line, exiting 0.
func TestRun_servesUntilSIGTERM(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	var stdout syncBuffer
	args := []string{"-listen", "udp://127.0.0.1:0", "-listen", "dot://127.0.0.1:0", "-listen", "tcp://127.0.0.1:0?stall=1",
		"-ca-cert", cf, "-ca-key", kf}
	lines, exit := started(t, run, args, &stdout, 4)
	if !strings.HasPrefix(lines[0], "ca created ") {
		t.Errorf("first line %q, want the CA creation", lines[0])
	}
	addr := func(i int) string { return strings.Fields(lines[i])[2] } // "listening udp 127.0.0.1:NNN"
	ca, err := certs.LoadCA(cf, kf)
	if err != nil {
		t.Fatalf("the CA written: %v", err)
	}
	q := new(dns.Msg)
	q.SetQuestion("cmd.example.", dns.TypeA)
	if _, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(q, addr(1)); err != nil {
		t.Fatal(err)
	}
	dot := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}}
	if _, _, err := dot.Exchange(q, addr(2)); err != nil {
		t.Fatal(err)
	}
	stalled, err := net.Dial("tcp", addr(3))
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("exit %d after SIGTERM, want 0", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	type counts struct {
		Queries     uint64 `json:"queries"`
		Connections uint64 `json:"connections"`
		Handshakes  uint64 `json:"handshakes"`
		Answered    uint64 `json:"answered"`
	}
	var got struct {
		counts
		PerListener map[string]counts `json:"per_listener"`
	}
	out := stdout.String()
	if strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("stdout %q, want one JSON line", out)
	}
	dotKey := "dot://" + addr(2)
	if got.Queries != 2 || got.Answered != 2 || got.Handshakes != 1 || len(got.PerListener) != 3 || got.PerListener[dotKey].Connections != 1 {
		t.Errorf("counters %s, want 2 queries answered, 1 handshake, 3 listeners, 1 connection on %s", out, dotKey)
	}
}

func TestRun_reusesAnExistingCA(t *testing.T) {
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	args := []string{"-listen", "doh://127.0.0.1:0", "-ca-cert", cf, "-ca-key", kf}
	for i, want := range []string{"ca created ", "ca loaded "} {
		ctx, cancel := context.WithCancel(context.Background())
		serveCtx := func(args []string, stdout, stderr io.Writer) int { return serve(ctx, args, stdout, stderr) }
		lines, exit := started(t, serveCtx, args, io.Discard, 2)
		cancel()
		if code := <-exit; code != exitOK {
			t.Errorf("run %d: exit %d", i, code)
		}
		if !strings.HasPrefix(lines[0], want) {
			t.Errorf("run %d: first line %q, want %q…", i, lines[0], want)
		}
	}
}
