package testutil

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
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
// (nxdns's configuration rejects port 0). Another process can take it before
// the program binds it; the launchers here then retry on another
// (portAttempts).
func FreePort(t testing.TB) uint16 {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).AddrPort().Port()
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		ln.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no loopback port free for both UDP and TCP in 20 tries")
	return 0
}
