package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestRun_listenTakenNamesAddressAndCulprits: with the port held by another
// socket, `nxdns run` exits 1 and its error names the address, the usual
// holders and how to find the one here (issue 16, finding 15).
func TestRun_listenTakenNamesAddressAndCulprits(t *testing.T) {
	held, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	addr := held.LocalAddr().String()
	out, code := nxdns(t, "run", "--config", writeLoopbackConfig(t), "--listen", addr)
	if code != exitProblems {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	_, port, _ := net.SplitHostPort(addr)
	for _, want := range []string{addr + " is taken", "systemd-resolved", "avahi", "another DNS server", "sport = :" + port, "--listen"} {
		if !strings.Contains(out, want) {
			t.Errorf("error lacks %q:\n%s", want, out)
		}
	}
}

// TestRun_listenFlagReplacesFile: --listen (twice) replaces the file's
// dns.listen: both flag addresses answer, the file's address is not bound.
func TestRun_listenFlagReplacesFile(t *testing.T) {
	cfg := writeLoopbackConfig(t) // listens on a free port of its own
	a := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	b := fmt.Sprintf("[::1]:%d", testutil.FreePort(t))
	if pc, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
		b = fmt.Sprintf("127.0.0.2:%d", testutil.FreePort(t)) // no IPv6 loopback here
	} else {
		pc.Close()
	}
	_, stderr := startRun(t, "--config", cfg, "--listen", a, "--listen", b)
	awaitLine(t, lineChan(stderr), "serving")
	for _, addr := range []string{a, b} {
		c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
		resp, _, err := c.Exchange(new(dns.Msg).SetQuestion("example.org.", dns.TypeA), addr)
		if err != nil {
			t.Fatalf("--listen %s does not answer: %v", addr, err)
		}
		if resp.Rcode == dns.RcodeRefused {
			t.Errorf("--listen %s: REFUSED a loopback client", addr)
		}
	}
	fileAddr := listenOf(t, cfg)
	if c, err := net.DialTimeout("tcp", fileAddr, time.Second); err == nil {
		c.Close()
		t.Errorf("the file's dns.listen %s is bound although --listen replaces it", fileAddr)
	}
}

func TestRun_listenFlagValidated(t *testing.T) {
	out, code := nxdns(t, "run", "--config", writeLoopbackConfig(t), "--listen", "127.0.0.1:65536")
	if code != exitProblems || !strings.Contains(out, `--listen[0]: "127.0.0.1:65536": port 65536 is out of range`) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestCheck_builtInListensOn5300: the built-in configuration serves on port
// 5300 (not 5353, which avahi holds) and answers the host's own networks.
// check, not run: the built-in upstreams are public resolvers, which tests
// never contact.
func TestCheck_builtInListensOn5300(t *testing.T) {
	out, code := nxdns(t, "check")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"listen:    127.0.0.1:5300, [::1]:5300", `allow:     local`} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// listenOf reads the dns.listen address writeLoopbackConfig chose.
func listenOf(t *testing.T, path string) string {
	t.Helper()
	out, code := nxdns(t, "check", "--config", path)
	if code != exitOK {
		t.Fatalf("check %s: exit %d\n%s", path, code, out)
	}
	for line := range strings.SplitSeq(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "listen:    "); ok {
			addr, _, _ := strings.Cut(rest, " ")
			return strings.TrimSuffix(addr, ",")
		}
	}
	t.Fatalf("no listen line in:\n%s", out)
	return ""
}

// startRun starts `nxdns run args...`, killed when the test ends, and
// returns it with its stderr.
func startRun(t *testing.T, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"run"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stderr
}

// addZone appends to the configuration at path a forward zone whose
// resolver is resolver.
func addZone(t *testing.T, path, resolver string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "[[forward_zones]]\nzone = \"lan\"\nresolver = %q\n", resolver); err != nil {
		t.Fatal(err)
	}
}

// TestRun_listenFlagLoopRejected: --listen replaces dns.listen, so a forward
// zone whose resolver is a --listen address is the loop that validation
// rejects for dns.listen: `nxdns run` exits 1 naming the zone's resolver.
func TestRun_listenFlagLoopRejected(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	path := writeLoopbackConfig(t)
	addZone(t, path, "udp://"+addr)
	// Bounded: a run that accepts the loop serves instead of exiting.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--config", path, "--listen", addr)
	b, _ := cmd.CombinedOutput()
	out, code := string(b), cmd.ProcessState.ExitCode()
	if ctx.Err() != nil {
		t.Fatalf("nxdns run accepted the loop and served:\n%s", out)
	}
	want := fmt.Sprintf(`forward_zones[0].resolver: "udp://%s" is nxdns itself (--listen %q): the zone's queries would loop`, addr, addr)
	if code != exitProblems || !strings.Contains(out, want) {
		t.Fatalf("exit %d, want 1 and %q:\n%s", code, want, out)
	}
}

// TestRun_reloadLoopOnListenFlagRejected: a SIGHUP reload of a file whose
// forward zone points at the --listen address is rejected, and the running
// configuration keeps answering.
func TestRun_reloadLoopOnListenFlagRejected(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	path := writeLoopbackConfig(t)
	cmd, stderr := startRun(t, "--config", path, "--listen", addr)
	lines := lineChan(stderr)
	awaitLine(t, lines, "serving")
	addZone(t, path, "udp://"+addr)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	awaitLine(t, lines, "forward_zones[0].resolver")
	c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
	if _, _, err := c.Exchange(new(dns.Msg).SetQuestion("lan.", dns.TypeA), addr); err != nil {
		t.Fatalf("after the rejected reload %s does not answer: %v", addr, err)
	}
}
