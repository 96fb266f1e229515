package testutil

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Bounds for an external program's life in a test. Generous: two shared
// cores under -race can slow a start-up tenfold.
const (
	programStartTimeout = 10 * time.Second // until its ready line
	programStopTimeout  = 10 * time.Second // from SIGTERM until exit, then SIGKILL
	portAttempts        = 5                // a free port can be taken before the program binds it
)

// lookProgram finds an installed resolver or skips the test, saying how to
// install it: these tests check interoperability with a server nobody here
// wrote, and CI installs it.
func lookProgram(t testing.TB, name, debianPackage string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (Debian: apt-get install %s); CI installs it", name, debianPackage)
	}
	return bin
}

// program is an external program run for one test. Its output (stdout and
// stderr together) is kept for the failure report and for tests that read
// it; t.Cleanup stops it with SIGTERM and waits for it to exit.
type program struct {
	name   string
	cmd    *exec.Cmd
	ready  chan struct{} // closed when an output line contained the ready marker
	exited chan struct{} // closed once the output is drained and the process reaped

	mu    sync.Mutex // guards lines and err
	lines []string
	err   error // the exit status; valid once exited is closed
}

// startProgram runs bin until the test ends and returns once a line of its
// output contains ready, the signal a daemon gives after binding its ports.
// If the program exits before that it returns nil, so the caller can retry
// on other ports; if it neither gets ready nor exits within
// programStartTimeout the test fails.
func startProgram(t testing.TB, name, bin string, args []string, ready string) *program {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("%s: pipe: %v", name, err)
	}
	p := &program{name: name, ready: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = w, w
	err = p.cmd.Start()
	w.Close() // the child holds its own copy: EOF on r means it has exited
	if err != nil {
		r.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	go p.watch(r, ready) // ends when the program exits; stop waits for it
	select {
	case <-p.ready:
		t.Cleanup(func() { p.stop(t) })
		return p
	case <-p.exited:
		t.Logf("%s exited before it was ready (%v):\n%s", name, p.err, p.output())
		return nil
	case <-time.After(programStartTimeout):
		p.stop(t)
		t.Fatalf("%s not ready within %v:\n%s", name, programStartTimeout, p.output())
		return nil
	}
}

// watch reads the output until the program closes it, signals the ready
// line, then reaps the process.
func (p *program) watch(r *os.File, ready string) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.lines = append(p.lines, line)
		p.mu.Unlock()
		if !signalled && strings.Contains(line, ready) {
			close(p.ready)
			signalled = true
		}
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	close(p.exited)
}

// stop ends the program (SIGTERM, then SIGKILL after programStopTimeout)
// and waits for it; on a failed test it logs the program's output.
func (p *program) stop(t testing.TB) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(programStopTimeout):
		t.Errorf("%s did not exit within %v of SIGTERM", p.name, programStopTimeout)
		p.cmd.Process.Kill()
		<-p.exited
	}
	if t.Failed() {
		t.Logf("%s output:\n%s", p.name, p.output())
	}
}

// count is how many output lines so far contain every one of subs.
func (p *program) count(subs ...string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, line := range p.lines {
		if containsAll(line, subs) {
			n++
		}
	}
	return n
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func (p *program) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// FreePort returns a loopback port that was free for both UDP and TCP a
// moment ago, for a program that cannot be told to bind port 0 and report
// (nxdns's configuration rejects port 0). It never names the same port
// twice in one test binary, so two calls give a program two ports.
//
// The port comes from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768–60999 by default), where no socket
// bound to port 0 and no outgoing connection lands: another package's test
// binary running at the same time takes its ports from that range, so the
// port stays free until the program binds it unless another binary's
// FreePort picked the same one in the same moment; the launchers of the
// interop servers here (unbound, knotd, dnsmasq) retry on another port when
// that happens (portAttempts).
func FreePort(t testing.TB) uint16 {
	t.Helper()
	lo, hi := freePortRange()
	for range 100 {
		port := uint16(lo + rand.IntN(hi-lo))
		if free := handOut(port); free && portFree(port) {
			return port
		}
	}
	t.Fatalf("no loopback port in %d–%d free for both UDP and TCP in 100 tries", lo, hi-1)
	return 0
}

// handedOut is the ports FreePort has returned in this binary (a set).
var handedOut sync.Map

// handOut records port as handed out; false if it already was.
func handOut(port uint16) bool {
	_, already := handedOut.LoadOrStore(port, true)
	return !already
}

// portFree says whether 127.0.0.1:port can be bound for TCP and for UDP.
func portFree(port uint16) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// freePortRange is the ports FreePort picks from, [lo, hi): up to 12 000
// ports below the start of the kernel's ephemeral range, not below 1024.
func freePortRange() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				hi = n
			}
		}
	}
	return max(1024, hi-12000), hi
}
