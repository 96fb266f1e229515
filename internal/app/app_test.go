package app

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/workers"
)

// TestMain fails the package if a test leaves a goroutine behind. The
// DNSSEC shadow queue's kept workers are the process's, not an app's
// (internal/dnssec shadow.go): one stays idle for workers.Idle after its
// last validation and then exits, so the check waits for them, bounded,
// before it looks; a worker still there after that is a leak like any other.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(workers.Idle + 2*time.Second)
		for keptWorkers() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond) // a bounded poll for the idle timer; nothing to wait on instead
		}
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: found unexpected goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// keptWorkers reports whether a kept worker (internal/workers) is running.
func keptWorkers() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Contains(buf, []byte("internal/workers.(*Workers).work("))
}

// rig is a fake DoT upstream, a fake LAN resolver (plain UDP), and a CA file.
type rig struct {
	ca       *certs.CA
	caFile   string
	dot      *fakeup.Server
	dotURL   string
	lan      *fakeup.Server
	lanAddr  string
	dir      string
	observed *observer.ObservedLogs
	log      *zap.Logger
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{ca: ca, dir: t.TempDir()}
	r.caFile = filepath.Join(r.dir, "ca.pem")
	if err := os.WriteFile(r.caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	r.dot = startFake(t, ca, "dot://127.0.0.1:0")
	r.dotURL = "tls://" + r.dot.Listeners()[0].Addr.String()
	r.lan = startFake(t, ca, "udp://127.0.0.1:0")
	r.lanAddr = r.lan.Listeners()[0].Addr.String()
	core, logs := observer.New(zap.InfoLevel)
	r.log, r.observed = zap.New(core), logs
	return r
}

func startFake(t *testing.T, ca *certs.CA, listen string) *fakeup.Server {
	t.Helper()
	l, err := fakeup.ParseListen(listen)
	if err != nil {
		t.Fatal(err)
	}
	s, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca, CertNames: []string{"upstream.test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// config returns a configuration listening on dnsAddr, forwarding to the
// fake DoT upstream, with the "lan" zone when withZone.
func (r *rig) config(t *testing.T, dnsAddr string, withZone bool) config.Config {
	t.Helper()
	text := fmt.Sprintf(`[dns]
listen = [%q]
[web]
listen = ""
[log]
queries = false
# The rig's upstream is an unsigned fake: counting its queries must not
# count DNSSEC's DS and DNSKEY lookups (validation: dnssec_test.go).
[dnssec]
mode = "off"
[[upstreams]]
url = %q
tls_name = "upstream.test"
ca_file = %q
`, dnsAddr, r.dotURL, r.caFile)
	if withZone {
		text += fmt.Sprintf("[[forward_zones]]\nzone = \"lan\"\nresolver = \"udp://%s\"\n", r.lanAddr)
	}
	path := r.write(t, text)
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (r *rig) write(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(r.dir, fmt.Sprintf("nxdns-%d.toml", time.Now().UnixNano()))
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs an App on cfg until the test ends.
func (r *rig) start(t *testing.T, cfg config.Config) *App {
	t.Helper()
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, a) })
	return a
}

func ask(t *testing.T, addr, name string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	if err != nil {
		t.Fatalf("query %s via %s: %v", name, addr, err)
	}
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Fatalf("query %s: rcode %s, %d answers", name, dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	return resp
}

// loopbackAddr is a DNS listen address free for both UDP and TCP.
func loopbackAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
}

func shutdown(t testing.TB, a *App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

// A second Shutdown (a deferred one after an explicit one) returns the
// first's result instead of closing everything again: the device registry,
// history and cache close once.
func TestShutdown_twiceIsHarmless(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	a := r.start(t, r.config(t, addr, false))
	ask(t, addr, "example.org.")
	shutdown(t, a)
	shutdown(t, a) // and once more at cleanup
}

func TestReload_goodFileChangesRoutingAndListener(t *testing.T) {
	r := newRig(t)
	addr1 := loopbackAddr(t)
	a := r.start(t, r.config(t, addr1, false))

	ask(t, addr1, "host.lan.")
	if got := r.lan.Counters().Queries; got != 0 {
		t.Fatalf("before reload the LAN resolver saw %d queries, want 0 (no zone yet)", got)
	}

	addr2 := loopbackAddr(t)
	if err := a.Reload(r.config(t, addr2, true)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	// The new zone's start-up probe reaches the LAN resolver too: let it
	// land, then count the query alone.
	testutil.WaitFor(t, "the zone's start-up probe", 5*time.Second, func() bool {
		zs := a.gen.Load().zones.Snapshot()
		return len(zs) > 0 && zs[0].ProbesOK+zs[0].ProbesFailed > 0
	})
	base := r.lan.Counters().Queries
	ask(t, addr2, "host.lan.")
	if got := r.lan.Counters().Queries - base; got != 1 {
		t.Errorf("after reload the LAN resolver saw %d queries, want 1: the new zone routes host.lan", got)
	}
	ask(t, addr2, "example.org.") // still the pool
	c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("old.example.", dns.TypeA), addr1); err == nil {
		t.Errorf("the old listener %s still answers after it was removed", addr1)
	}
}

// A library caller that leaves Options.Level zero must be able to reload
// (issue 12: SetLevel on the zero AtomicLevel panicked).
func TestReload_zeroLevelOptionDoesNotPanic(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	a, err := Start(r.config(t, addr, false), Options{Logger: r.log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, a) })
	if err := a.Reload(r.config(t, addr, true)); err != nil {
		t.Fatalf("reload: %v", err)
	}
	ask(t, addr, "host.lan.")
}

func TestReload_badFileKeepsServingAndLogsEveryProblem(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	a := r.start(t, r.config(t, addr, false))

	bad := r.write(t, "[dns]\nlisten = [\"nope\"]\nbogus = 1\n[[upstreams]]\nurl = \"ftp://x\"\n")
	if err := a.ReloadFile(bad); err == nil {
		t.Fatal("ReloadFile accepted an invalid file")
	}
	var problems []string
	for _, e := range r.observed.FilterMessage("reload rejected: configuration problem").All() {
		problems = append(problems, e.ContextMap()["problem"].(string))
	}
	for _, want := range []string{"dns.bogus", "dns.listen[0]", "upstreams[0].url"} {
		found := false
		for _, p := range problems {
			found = found || strings.HasPrefix(p, want+":")
		}
		if !found {
			t.Errorf("no logged problem for %s; logged: %q", want, problems)
		}
	}
	ask(t, addr, "still.example.") // the old configuration answers
}

func TestReload_unbindableListenerKeepsRunningConfiguration(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	a := r.start(t, r.config(t, addr, false))
	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if err := a.Reload(r.config(t, busy.LocalAddr().String(), true)); err == nil {
		t.Fatal("reload onto a busy address succeeded")
	}
	ask(t, addr, "host.lan.")
	if got := r.lan.Counters().Queries; got != 0 {
		t.Errorf("the rejected configuration's zone was used (%d LAN queries)", got)
	}
}

func TestReload_inFlightQueryFinishesOnTheOldGeneration(t *testing.T) {
	r := newRig(t)
	slow := startFake(t, r.ca, "dot://127.0.0.1:0?latency=700ms")
	r.dotURL = "tls://" + slow.Listeners()[0].Addr.String()
	addr := loopbackAddr(t)
	a := r.start(t, r.config(t, addr, false))

	answered := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		resp, _, _ := c.Exchange(new(dns.Msg).SetQuestion("in-flight.example.", dns.TypeA), addr)
		answered <- resp
	}()
	testutil.WaitFor(t, "the query to reach the slow upstream", 5*time.Second, func() bool { return slow.Counters().Queries >= 2 }) // probe + query

	// The new generation forwards elsewhere: the in-flight query must still
	// be answered by the old one, whose pool stays open until it is done.
	r.dotURL = "tls://127.0.0.1:1"
	if err := a.Reload(r.config(t, addr, false)); err != nil {
		t.Fatal(err)
	}
	resp := <-answered
	if resp == nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Fatalf("in-flight query across the reload: %v, want the old upstream's answer", resp)
	}
}

func TestReload_webBindFailureKeepsListenersAndRouting(t *testing.T) {
	r := newRig(t)
	addr1 := loopbackAddr(t)
	a := r.start(t, r.config(t, addr1, false))
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := r.config(t, loopbackAddr(t), true)
	cfg.Web.Listen = busy.Addr().String()
	if err := a.Reload(cfg); err == nil {
		t.Fatal("reload onto a busy web address succeeded")
	}
	ask(t, addr1, "host.lan.") // the old listener, the old routing (no zone)
	if got := r.lan.Counters().Queries; got != 0 {
		t.Errorf("the rejected configuration's zone was used (%d LAN queries)", got)
	}
}

// Linux refuses 0.0.0.0:P while 127.0.0.1:P is bound, which is the change
// the deploy guide suggests for scraping from the LAN. Only loopback is
// queried.
func TestReload_webMovesToTheWildcardOnTheSamePort(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	port := testutil.FreePort(t)
	cfg.Web.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	a := r.start(t, cfg)
	scrape(t, port)

	cfg.Web.Listen = fmt.Sprintf("0.0.0.0:%d", port)
	if err := a.Reload(cfg); err != nil {
		t.Fatalf("reload to the wildcard on the same port: %v", err)
	}
	scrape(t, port)
}

func TestReload_failureAfterReleasingTheWebPortBindsItAgain(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	port := testutil.FreePort(t)
	cfg.Web.Listen = fmt.Sprintf("127.0.0.1:%d", port)
	a := r.start(t, cfg)

	busy, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := r.config(t, busy.LocalAddr().String(), false) // DNS listener cannot bind
	bad.Web.Listen = fmt.Sprintf("0.0.0.0:%d", port)
	if err := a.Reload(bad); err == nil {
		t.Fatal("reload onto a busy DNS address succeeded")
	}
	scrape(t, port) // the old web address serves again
	ask(t, addr, "still.example.")
}

// scrape fetches /metrics from 127.0.0.1:port.
func scrape(t *testing.T, port uint16) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
}

func TestDrainBoundCoversTheLongestBudget(t *testing.T) {
	for _, c := range []struct{ total, read, want int }{
		{5000, 3000, 6000},
		{10000, 3000, 11000},
		{2000, 7000, 8000},
	} {
		g := &generation{cfg: config.Default()}
		g.cfg.Upstream.TotalTimeoutMS, g.cfg.Upstream.ReadTimeoutMS = c.total, c.read
		if got := g.drainBound(); got != time.Duration(c.want)*time.Millisecond {
			t.Errorf("total %d read %d: drain bound %v, want %d ms", c.total, c.read, got, c.want)
		}
	}
}

func TestProbe_reportsEachUpstream(t *testing.T) {
	r := newRig(t)
	cfg := r.config(t, loopbackAddr(t), false)
	dead := cfg.Upstreams[0]
	dead.URL = "tls://127.0.0.1:1" // nothing listens on port 1
	cfg.Upstreams = append(cfg.Upstreams, dead)
	results := Probe(context.Background(), cfg)
	if len(results) != 2 {
		t.Fatalf("%d results, want 2", len(results))
	}
	if results[0].Err != nil {
		t.Errorf("live upstream: %v", results[0].Err)
	}
	if results[1].Err == nil || results[1].URL != "tls://127.0.0.1:1" {
		t.Errorf("dead upstream: %+v, want a failure naming tls://127.0.0.1:1", results[1])
	}
	if r.dot.Counters().Queries != 1 {
		t.Errorf("the live upstream saw %d queries, want exactly the one probe", r.dot.Counters().Queries)
	}
}
