package vmtests

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// SIGHUP with an invalid file: every problem is logged, systemd hears
// RELOADING then READY, and the running configuration keeps answering.
// SIGHUP with a valid file: new queries follow the new configuration.
func TestSIGHUPReload(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	first := startUpstream(t, ca, "dot://127.0.0.1:0")
	second := startUpstream(t, ca, "dot://127.0.0.1:0")
	p := startNxdns(t, ca, settings{}, first)
	good, err := os.ReadFile(p.cfg)
	if err != nil {
		t.Fatal(err)
	}

	writeFile(t, p.cfg, "[dns]\nlisten = [\"nonsense\"]\n[[upstreams]]\nurl = \"ftp://x\"\n")
	hangUp(t, p)
	if err := p.notify.await("RELOADING=1", 10*time.Second); err != nil {
		t.Fatalf("no RELOADING=1 after SIGHUP: %v", err)
	}
	if err := p.notify.await("READY=1", 10*time.Second); err != nil {
		t.Fatalf("no READY=1 after the rejected reload: %v", err)
	}
	// The log is read from the process's stderr a moment behind its
	// notifications, so wait for the lines rather than count at once.
	for _, path := range []string{"dns.listen[0]", "upstreams[0].url"} {
		testutil.WaitFor(t, "a log line naming the problem at "+path, 5*time.Second, func() bool {
			return p.logs.count("reload rejected", path+":") == 1
		})
	}
	// The running configuration (its only upstream is first) still answers.
	// Counting first's queries here would race its start-up probe, which may
	// not have been sent yet.
	ask(t, p, "after-bad-reload.example.")

	// Same file, the second upstream instead of the first.
	next := strings.Replace(string(good), first.url, second.url, 1)
	writeFile(t, p.cfg, next)
	hangUp(t, p)
	if err := p.notify.await("READY=1", 10*time.Second); err != nil {
		t.Fatalf("no READY=1 after the reload: %v", err)
	}
	before := second.counts().Queries
	ask(t, p, "after-good-reload.example.")
	if got := second.counts().Queries; got <= before {
		t.Errorf("second upstream saw %d queries before and %d after; want the new query there", before, got)
	}
}

// SIGTERM while a query is in flight to a slow upstream: the query gets its
// answer, systemd hears STOPPING, and the process exits 0.
func TestSIGTERMDrainsInFlightQueries(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	slow := startUpstream(t, ca, "dot://127.0.0.1:0?latency=800ms")
	p := startNxdns(t, ca, settings{}, slow)

	answered := make(chan *dns.Msg, 1)
	go func() {
		c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
		resp, _, _ := c.Exchange(new(dns.Msg).SetQuestion("draining.example.", dns.TypeA), p.dns)
		answered <- resp
	}()
	testutil.WaitFor(t, "the query to reach the upstream", 5*time.Second, func() bool { return slow.counts().Queries >= 2 })
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if resp := <-answered; resp == nil || resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
		t.Errorf("query in flight at SIGTERM: %v, want its answer", resp)
	}
	if err := p.notify.await("STOPPING=1", 5*time.Second); err != nil {
		t.Errorf("no STOPPING=1: %v", err)
	}
	if err := p.terminate(t); err != nil {
		t.Errorf("exit after SIGTERM: %v\n%s", err, p.logs.String())
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func hangUp(t *testing.T, p *nxdnsProc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// ask sends one UDP query to nxdns and expects an answer.
func ask(t *testing.T, p *nxdnsProc, name string) {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), p.dns)
	if err != nil || resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("query %s: %v %v", name, resp, err)
	}
}
