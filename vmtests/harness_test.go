package vmtests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nxdns/nxdns/internal/burst"
	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/pathemu"
	"github.com/nxdns/nxdns/internal/testutil"
)

// scenarioPath is the path between nxdns and every fake upstream: the round
// trip a Pi has to a public resolver (docs/design.md#lesson-round-trips: 15–40 ms), so each
// TCP connect, TLS handshake and query costs its real round trips
// (internal/pathemu). The jitter keeps answers from arriving in lockstep.
var scenarioPath = pathemu.Path{RTT: 30 * time.Millisecond, Jitter: 4 * time.Millisecond}

// nxdnsBinary is the real binary, built once in TestMain.
var nxdnsBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nxdns-vmtests")
	if err != nil {
		panic(err)
	}
	nxdnsBinary = filepath.Join(dir, "nxdns")
	// Built as the packages build it (nix/common.nix, scripts/release.sh):
	// without cgo, so the scenarios measure the binary an operator runs.
	build := exec.Command("go", "build", "-o", nxdnsBinary, "../cmd/nxdns")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testCA is one CA per test, its PEM written where nxdns's ca_file reads it.
type testCA struct {
	*certs.CA
	file string
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return testCA{ca, file}
}

// upstreamNode is an upstream nxdns is configured with: a fake upstream with
// one listener behind an emulated path, or (srv nil) a real resolver the
// test started.
type upstreamNode struct {
	srv     *fakeup.Server
	url     string // what nxdns's configuration names: the relay's address, e.g. tls://127.0.0.1:41234
	tlsName string // the name its certificate carries; "" means upstream.test
	key     string // the counters key of its listener
}

// startUpstream starts a fake upstream from a listen URL with port 0, e.g.
// "dot://127.0.0.1:0?latency=30ms" or "doh://127.0.0.1:0/dns-query?stall=1",
// behind scenarioPath.
func startUpstream(t *testing.T, ca testCA, listen string) *upstreamNode {
	return startUpstreamOn(t, ca, listen, scenarioPath)
}

// startUpstreamOn is startUpstream across path: nxdns connects to a relay
// (internal/pathemu) in front of the fake upstream.
func startUpstreamOn(t *testing.T, ca testCA, listen string, path pathemu.Path) *upstreamNode {
	t.Helper()
	return startUpstreamWith(t, ca, listen, path, func(*fakeup.Config) {})
}

// startUpstreamWith is startUpstreamOn with the fake upstream's
// configuration edited by edit before it starts (its TTL, its listener's
// Hooks).
func startUpstreamWith(t *testing.T, ca testCA, listen string, path pathemu.Path, edit func(*fakeup.Config)) *upstreamNode {
	t.Helper()
	l, err := fakeup.ParseListen(listen)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca.CA, CertNames: []string{"upstream.test", "127.0.0.1"}}
	edit(&cfg)
	srv, err := fakeup.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	b := srv.Listeners()[0]
	relay, err := pathemu.Start("127.0.0.1:0", b.Addr.String(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	n := &upstreamNode{srv: srv, key: b.Key}
	switch b.Transport {
	case fakeup.DoT:
		n.url = "tls://" + relay.Addr.String()
	case fakeup.DoH:
		n.url = "https://" + relay.Addr.String() + l.Path
	case fakeup.DoQ:
		n.url = "quic://" + relay.Addr.String()
	default:
		t.Fatalf("upstream transport %s is not encrypted", b.Transport)
	}
	return n
}

func (n *upstreamNode) counts() fakeup.Counts { return n.srv.Counters().PerListener[n.key] }

// nxdnsProc is a running nxdns binary.
type nxdnsProc struct {
	cmd     *exec.Cmd
	cfg     string // its configuration file, rewritten by reload tests
	dns     string // host:port of its DNS listener
	web     string // host:port of /metrics
	logs    *logLines
	notify  *notifySocket // what it tells systemd
	exited  chan struct{} // closed when the process has exited
	exitErr error         // cmd.Wait's result, read after exited
}

// settings shapes the generated configuration.
type settings struct {
	attemptMS, totalMS int // 0 means the shipped defaults (2000, 4000)
	queryLog           bool
	extra              string // TOML appended as is: forward zones, clients
	dns                string // more keys of [dns], one per line: "cache_max_bytes = 1048576\n"
	// dnssec is the [dnssec] section's keys; "" is mode = "off": the
	// scenarios' upstreams are fakes and test hierarchies under no real
	// root, and validation has tests of its own (internal/app dnssec_test.go).
	dnssec  string
	web     string // web.listen; "": a free loopback port
	netns   string // run in this network namespace (ip netns exec); "": the test's own
	webKeys string // more keys of [web], one per line
}

// startNxdns writes a configuration for the given upstreams (in priority
// order) and starts the binary, returning once it has told a fake systemd
// READY=1 — the same signal the NixOS unit waits for.
func startNxdns(t *testing.T, ca testCA, s settings, ups ...*upstreamNode) *nxdnsProc {
	t.Helper()
	dir := t.TempDir()
	p := &nxdnsProc{dns: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), web: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), logs: &logLines{}, exited: make(chan struct{})}
	if s.web != "" {
		p.web = s.web
	}
	var b strings.Builder
	fmt.Fprintf(&b, "[dns]\nlisten = [%q]\n%s[web]\nlisten = %q\n%s[log]\nlevel = \"info\"\nqueries = %v\n", p.dns, s.dns, p.web, s.webKeys, s.queryLog)
	dnssec := s.dnssec
	if dnssec == "" {
		dnssec = "mode = \"off\"\n"
	}
	fmt.Fprintf(&b, "[dnssec]\n%s", dnssec)
	if s.attemptMS > 0 {
		fmt.Fprintf(&b, "[upstream]\nattempt_timeout_ms = %d\ntotal_timeout_ms = %d\n", s.attemptMS, s.totalMS)
	}
	for i, u := range ups {
		tlsName := u.tlsName
		if tlsName == "" {
			tlsName = "upstream.test"
		}
		fmt.Fprintf(&b, "[[upstreams]]\nurl = %q\ntls_name = %q\nca_file = %q\npriority = %d\n", u.url, tlsName, ca.file, i)
	}
	b.WriteString(s.extra)
	p.cfg = filepath.Join(dir, "nxdns.toml")
	if err := os.WriteFile(p.cfg, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	p.notify = listenNotify(t, dir)
	p.cmd = exec.Command(nxdnsBinary, "run", "--config", p.cfg)
	if s.netns != "" {
		// ip netns exec execs nxdns in the namespace: the pid, and
		// SIGTERM to it, are nxdns's.
		p.cmd = exec.Command("ip", "netns", "exec", s.netns, nxdnsBinary, "run", "--config", p.cfg)
	}
	p.cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+p.notify.path)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.logs.drain(stderr)
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.stop(t) })
	if err := p.notify.await("READY=1", 15*time.Second); err != nil {
		t.Fatalf("nxdns never said READY=1: %v\nlog:\n%s", err, p.logs.String())
	}
	return p
}

// stop sends SIGTERM and expects a clean exit.
func (p *nxdnsProc) stop(t *testing.T) {
	if err := p.terminate(t); err != nil {
		t.Errorf("nxdns exited with %v after SIGTERM\nlog:\n%s", err, p.logs.String())
	}
}

// terminate sends SIGTERM (unless the process already exited) and returns
// how it exited; a process still running after 15 s is killed.
func (p *nxdnsProc) terminate(t *testing.T) error {
	select {
	case <-p.exited:
		return p.exitErr
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.exitErr
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("nxdns did not exit within 15 s of SIGTERM")
		return p.exitErr
	}
}

// burst runs the burst client against nxdns.
func (p *nxdnsProc) burst(t *testing.T, mutate func(*burst.Config)) *burst.Report {
	t.Helper()
	cfg := burst.DefaultConfig()
	cfg.Target = p.dns
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := burst.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("burst: %v", err)
	}
	return r
}

// rssBytes is the process's resident memory now (VmRSS).
func (p *nxdnsProc) rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/PID/status")
	return 0
}

// metrics scrapes /metrics and parses the exposition format.
func (p *nxdnsProc) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + p.web + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// metric sums a family's samples whose labels include every pair in match.
func metric(fams map[string]*dto.MetricFamily, name string, match ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if !hasLabels(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, match []string) bool {
	for i := 0; i+1 < len(match); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == match[i] && l.GetValue() == match[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// logLines collects the process's stderr.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) drain(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		l.mu.Lock()
		l.lines = append(l.lines, sc.Text())
		l.mu.Unlock()
	}
}

// count is how many lines contain every one of subs.
func (l *logLines) count(subs ...string) int { return len(l.matching(subs...)) }

// matching is the lines, in order, that contain every one of subs.
func (l *logLines) matching(subs ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// notifySocket is a fake systemd: the datagram socket NOTIFY_SOCKET names.
type notifySocket struct {
	path string
	conn *net.UnixConn
}

func listenNotify(t *testing.T, dir string) *notifySocket {
	t.Helper()
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &notifySocket{path: path, conn: conn}
}

// await reads notifications until one contains want.
func (n *notifySocket) await(want string, bound time.Duration) error {
	n.conn.SetReadDeadline(time.Now().Add(bound))
	buf := make([]byte, 4096)
	for {
		k, err := n.conn.Read(buf)
		if err != nil {
			return err
		}
		if strings.Contains(string(buf[:k]), want) {
			return nil
		}
	}
}

// readFile is path's contents; the test fails if it cannot be read.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
