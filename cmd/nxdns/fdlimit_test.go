package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runUnderLimits starts the binary on a loopback configuration with a
// forward zone, under the given soft and hard descriptor limits (set by
// the shell, as systemd's LimitNOFILE= would), and returns its stderr lines
// up to "serving" and its pid.
func runUnderLimits(t *testing.T, soft, hard int) (lines []string, pid int) {
	t.Helper()
	p := freePorts(t, 4)
	cfg := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
[web]
listen = "127.0.0.1:%d"
[[forward_zones]]
zone = "lan"
resolver = "udp://127.0.0.1:%d"
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "dot.test"
`, p[0], p[1], p[2], p[3])
	path := filepath.Join(t.TempDir(), "nxdns.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", fmt.Sprintf("ulimit -Sn %d && ulimit -Hn %d && exec %s run --config %s", soft, hard, binary, path))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }) //nolint:errcheck // cleanup
	ch := lineChan(stderr)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			if !ok {
				t.Fatalf("stderr ended before serving:\n%s", strings.Join(lines, "\n"))
			}
			lines = append(lines, l)
			if strings.Contains(l, `"serving"`) || strings.Contains(l, "\tserving\t") || strings.Contains(l, " serving") {
				return lines, cmd.Process.Pid
			}
		case <-timeout:
			t.Fatalf("not serving within 10 s:\n%s", strings.Join(lines, "\n"))
		}
	}
}

// With 256 descriptors a forward-zone lookup found none (issue 30 finding
// 20): nxdns now says at start that the limit is below what its caps hold
// open, and what to raise.
func TestRun_lowDescriptorLimitIsNamed(t *testing.T) {
	lines, _ := runUnderLimits(t, 256, 256)
	all := strings.Join(lines, "\n")
	if !strings.Contains(all, "open-file limit") || !strings.Contains(all, "LimitNOFILE") || !strings.Contains(all, "forward_zone_queries") {
		t.Errorf("no warning naming the limit, LimitNOFILE and the forward zones' share:\n%s", all)
	}
}

// A low soft limit under a high hard one is raised to (one below) the hard
// one, as Go 1.26 does at start, and then nothing is wrong.
func TestRun_softDescriptorLimitRaisedToHard(t *testing.T) {
	var hard syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &hard); err != nil {
		t.Fatal(err)
	}
	if hard.Max < 4096 {
		t.Skipf("the hard limit here is %d: too low to show the raise", hard.Max)
	}
	max := int(min(hard.Max, 1<<20))
	lines, pid := runUnderLimits(t, 256, max)
	if all := strings.Join(lines, "\n"); strings.Contains(all, "open-file limit") {
		t.Errorf("warned with a hard limit of %d:\n%s", max, all)
	}
	limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.SplitSeq(string(limits), "\n") {
		if strings.HasPrefix(l, "Max open files") {
			// Go raises it to one below the hard limit (syscall's init).
			f := strings.Fields(l)
			soft, err1 := strconv.Atoi(f[3])
			hard, err2 := strconv.Atoi(f[4])
			if err1 != nil || err2 != nil || soft < hard-1 {
				t.Errorf("soft limit not raised to the hard one: %q", l)
			}
		}
	}
}
