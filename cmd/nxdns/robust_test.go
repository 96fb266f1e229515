package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// A stderr nobody drains (a stand-in for a busy journald) costs log lines,
// counted, never DNS service; a stderr whose reader went away does not kill
// the process (SIGPIPE); SIGTERM still stops it (docs/design.md#log-never-blocks, issue 13 finding
// 2). Before the fix the query-log write blocked inside the listener slot:
// after about 270 queries nothing was answered, SIGTERM hung on its own log
// line, and closing the reader killed nxdns with SIGPIPE (exit 141).
func TestRun_stderrNotDrainedKeepsServing(t *testing.T) {
	dnsPort, webPort := testutil.FreePort(t), testutil.FreePort(t)
	// 127.0.0.1 is outside dns.allow: every query is REFUSED at once, with
	// its query-log line, and no upstream is involved.
	cfg := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
allow = ["10.0.0.0/8"]
[web]
listen = "127.0.0.1:%d"
[log]
queries = true
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "dot.test"
`, dnsPort, webPort, testutil.FreePort(t))
	path := filepath.Join(t.TempDir(), "nxdns.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", path)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	defer cmd.Process.Kill()
	readUntil(t, r, "serving") // then stop reading: the pipe fills

	addr := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	const queries = 6000 // 4096 queued lines plus a full pipe: some must drop
	if got := refusedAnswers(t, addr, queries); got != queries {
		t.Fatalf("%d of %d queries answered while stderr was not drained", got, queries)
	}
	if n := scrapeCounter(t, webPort, "nxdns_log_dropped_total"); n == 0 {
		t.Error("nxdns_log_dropped_total is 0 after more lines than the queue holds")
	}

	r.Close() // the reader goes away: writes now fail with EPIPE
	if got := refusedAnswers(t, addr, 200); got != 200 {
		t.Fatalf("%d of 200 queries answered after stderr's reader went away", got)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("nxdns exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nxdns did not stop within 15 s of SIGTERM with stderr stalled")
	}
}

// readUntil reads r line by line until one contains want, then stops.
func readUntil(t *testing.T, r io.Reader, want string) {
	t.Helper()
	found := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if strings.Contains(sc.Text(), want) {
				found <- true
				return
			}
		}
		found <- false
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Fatalf("stderr ended before a line containing %q", want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no line containing %q within 10 s", want)
	}
}

// refusedAnswers sends n queries one at a time over UDP and counts the
// REFUSED answers; it gives up after five queries in a row go unanswered.
func refusedAnswers(t *testing.T, addr string, n int) int {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	conn, err := c.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, misses := 0, 0
	for i := range n {
		q := new(dns.Msg).SetQuestion(fmt.Sprintf("q%d.example.", i), dns.TypeA)
		resp, _, err := c.ExchangeWithConn(q, conn)
		if err != nil || resp.Rcode != dns.RcodeRefused {
			if misses++; misses == 5 {
				return got
			}
			continue
		}
		got, misses = got+1, 0
	}
	return got
}

// scrapeCounter reads one unlabelled series from /metrics.
func scrapeCounter(t *testing.T, port uint16, name string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s not in /metrics", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A ca_file that is a FIFO fails `nxdns check` at once, and a SIGHUP reload
// that meets one leaves SIGTERM working (issue 13 finding 3: both hung, and
// SIGTERM was ignored because the reload ran in the signal loop).
func TestRun_caFileFIFOFailsFastAndSIGTERMStillStops(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "ca.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(ca string) string {
		cfg := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
[web]
listen = ""
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "dot.test"
ca_file = %q
`, testutil.FreePort(t), testutil.FreePort(t), ca)
		path := filepath.Join(dir, "nxdns.toml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}

	path := write(fifo)
	start := time.Now()
	out, code := nxdns(t, "check", "--config", path)
	if code != exitProblems || !strings.Contains(out, "ca_file") || !strings.Contains(out, "not a regular file") {
		t.Errorf("check with a FIFO ca_file: exit %d, output:\n%s", code, out)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("check took %v", d)
	}

	path = write(caFile)
	cmd := exec.Command(binary, "run", "--config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := lineChan(stderr)
	awaitLine(t, lines, "serving")
	write(fifo)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	awaitLine(t, lines, "reload rejected")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("nxdns exited with %v after SIGTERM", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("nxdns did not stop within 15 s of SIGTERM after a reload met a FIFO")
	}
}

// lineChan passes r's lines on, dropping those no one reads in time, so
// the child never blocks on a full pipe; it closes when r ends.
func lineChan(r io.Reader) <-chan string {
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	return lines
}

func awaitLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stderr ended before a line containing %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no line containing %q within 10 s", want)
		}
	}
}

// A hostile upstream cannot make nxdns amplify: whatever the DoT upstream or
// a forward zone's resolver sends (a 65 000-byte EDE text; 60 KB of TXT
// ending in a TSIG), the UDP answer fits the client's limit (issue 13
// finding 1: 65 KB datagrams went to clients that advertised 512 bytes, a
// 3553× ratio).
func TestRun_hostileUpstreamCannotAmplify(t *testing.T) {
	dir := t.TempDir()
	ca := testutil.NewCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	var listens []fakeup.Listen
	for _, u := range []string{"dot://127.0.0.1:0?ede_text=65000", "tcp://127.0.0.1:0?txt=60000&tsig=1", "udp://127.0.0.1:0?txt=60000&tsig=1"} {
		l, err := fakeup.ParseListen(u)
		if err != nil {
			t.Fatal(err)
		}
		listens = append(listens, l)
	}
	up, err := fakeup.Start(fakeup.Config{Listen: listens, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	b := up.Listeners()
	dnsPort := testutil.FreePort(t)
	cfg := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
[web]
listen = ""
[[upstreams]]
url = "tls://%s"
tls_name = "localhost"
ca_file = %q
[[forward_zones]]
zone = "tz"
resolver = "tcp://%s"
[[forward_zones]]
zone = "uz"
resolver = "udp://%s"
`, dnsPort, b[0].Addr, caFile, b[1].Addr, b[2].Addr)
	path := filepath.Join(dir, "nxdns.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run", "--config", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	awaitLine(t, lineChan(stderr), "serving")

	addr := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	for _, name := range []string{"a.example.", "a.tz.", "a.uz."} {
		for _, edns := range []uint16{0, 512, 1232, 4096} {
			q := new(dns.Msg).SetQuestion(name, dns.TypeTXT)
			limit := 512
			if edns > 0 {
				q.SetEdns0(edns, false)
				limit = min(max(int(edns), 512), 1232)
			}
			c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, UDPSize: 65535}
			resp, _, err := c.Exchange(q, addr)
			if err != nil {
				t.Fatalf("%s EDNS %d: %v", name, edns, err)
			}
			if n := resp.Len(); n > limit {
				t.Errorf("%s EDNS %d: %d-byte answer, the client's limit is %d", name, edns, n, limit)
			}
			if resp.IsTsig() != nil {
				t.Errorf("%s EDNS %d: the upstream's TSIG was relayed", name, edns)
			}
		}
	}
}
