package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/nxdns/nxdns/internal/testutil"
)

// binary is the real nxdns, built once for these tests: the claims here are
// about what an operator's shell sees (output and exit codes).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nxdns-cmd-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "nxdns")
	// Without cgo, as the packages build it (nix/common.nix,
	// scripts/release.sh): the pure-Go resolver and no glibc.
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		panic("go build: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// nxdns runs the binary and returns its stdout+stderr and exit code.
func nxdns(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("nxdns %v: %v", args, err)
		}
	}
	return string(out), cmd.ProcessState.ExitCode()
}

func TestCheckEveryBadFixturePrintsItsPathAndExits1(t *testing.T) {
	fixtures, err := filepath.Glob("../../internal/config/testdata/bad/*.toml")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range fixtures {
		t.Run(filepath.Base(f), func(t *testing.T) {
			wants := wantedPaths(t, f)
			out, code := nxdns(t, "check", "--config", f)
			if code != exitProblems {
				t.Fatalf("exit %d, want 1; output:\n%s", code, out)
			}
			for _, path := range wants {
				line := f + ": " + path + ": "
				if path == "-" { // a problem with no key, such as a syntax error
					line = f + ": "
				}
				if !strings.Contains(out, line) {
					t.Errorf("output lacks a line for %s:\n%s", path, out)
				}
			}
		})
	}
}

// wantedPaths reads the "# want: PATH CODE" header lines of a fixture.
func wantedPaths(t *testing.T, file string) []string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var paths []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# want: ")
		if !ok {
			continue
		}
		if fields := strings.Fields(rest); len(fields) > 0 {
			paths = append(paths, fields[0])
		}
	}
	if len(paths) == 0 {
		t.Fatalf("%s has no '# want:' line", file)
	}
	return paths
}

func TestCheckExampleConfigIsValid(t *testing.T) {
	out, code := nxdns(t, "check", "--config", "../../docs/examples/nxdns.toml")
	if code != exitOK {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{"ok", "upstreams, in priority order:", "forward zones:", "lan", "group kids's own upstreams, in priority order:\n  1. tls://1.1.1.3"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// A file that breaks the budget inequalities (docs/design.md#config-budgets) is valid: check exits
// 0 and warns, naming each broken promise; the shipped defaults warn of none.
func TestCheckWarnsWhenBudgetsBreakTheInequalities(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "nxdns.toml")
	os.WriteFile(file, []byte("[upstream]\nattempt_timeout_ms = 3000\ntotal_timeout_ms = 5000\n[[upstreams]]\nurl = \"tls://9.9.9.9\"\n"), 0o644)
	out, code := nxdns(t, "check", "--config", file)
	if code != exitOK {
		t.Fatalf("exit %d, want 0: a warning is not a problem\n%s", code, out)
	}
	for _, want := range []string{"warning: upstream.attempt_timeout_ms:", "warning: upstream.total_timeout_ms:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, _ := nxdns(t, "check"); strings.Contains(out, "warning") {
		t.Errorf("the built-in configuration warns:\n%s", out)
	}
}

func TestCheckBuiltInConfig(t *testing.T) {
	out, code := nxdns(t, "check")
	if code != exitOK || !strings.Contains(out, "built-in configuration: ok") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{{}, {"serve"}, {"check", "--bogus"}, {"run", "extra"}, {"version", "x"}} {
		out, code := nxdns(t, args...)
		if code != exitUsage {
			t.Errorf("nxdns %v: exit %d, want 2\n%s", args, code, out)
		}
		if !strings.Contains(out, "usage") && !strings.Contains(out, "Usage") {
			t.Errorf("nxdns %v printed no usage:\n%s", args, out)
		}
	}
}

func TestVersion(t *testing.T) {
	out, code := nxdns(t, "version")
	if code != exitOK || !strings.HasPrefix(out, "nxdns ") || !strings.Contains(out, "commit") {
		t.Fatalf("exit %d: %q", code, out)
	}
}

func TestVersionStampedByLdflags(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "nxdns")
	ld := "-X github.com/nxdns/nxdns/internal/buildinfo.Version=9.8.7 -X github.com/nxdns/nxdns/internal/buildinfo.Commit=feedc0de"
	build := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as the packages stamp it
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "nxdns 9.8.7 (commit feedc0de") {
		t.Fatalf("version = %q, %v", out, err)
	}
}

func TestRunExitsCleanlyOnSIGTERMAndSIGINT(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(binary, "run", "--config", writeLoopbackConfig(t))
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			awaitLine(t, lineChan(stderr), "serving")
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("nxdns run after %v: %v", sig, err)
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("nxdns run did not exit within 10 s of %v", sig)
			}
		})
	}
}

// writeLoopbackConfig writes a configuration that listens on free loopback
// ports and forwards to an upstream that is never reached in these tests.
func writeLoopbackConfig(t *testing.T) string {
	t.Helper()
	cfg := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
[web]
listen = "127.0.0.1:%d"
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "dot.test"
`, testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t))
	path := filepath.Join(t.TempDir(), "nxdns.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHashPassword_printsAHashTheLoginAccepts(t *testing.T) {
	var out, errb strings.Builder
	if code := cmdHashPassword(nil, strings.NewReader("s3cret pass\n"), &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	hash := strings.TrimSpace(out.String())
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte("s3cret pass")) != nil {
		t.Fatalf("%q does not verify the password (without its newline)", hash)
	}
	if code := cmdHashPassword(nil, strings.NewReader("\n"), &out, &errb); code != exitProblems {
		t.Errorf("empty password: exit %d", code)
	}
}

// A password shorter than 8 characters is refused with the minimum in the
// message (issue 30 finding 20: a one-character password was hashed), and
// 8 characters of any script are enough.
func TestHashPassword_refusesAShortPassword(t *testing.T) {
	for _, short := range []string{"x", "1234567", "pässwö"} {
		cmd := exec.Command(binary, "hash-password")
		cmd.Stdin = strings.NewReader(short + "\n")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != exitProblems || !strings.Contains(string(out), "at least 8") {
			t.Errorf("password %q: exit %d %q, want %d naming the minimum of 8", short, code, out, exitProblems)
		}
	}
	var out, errb strings.Builder
	if code := cmdHashPassword(nil, strings.NewReader("pässwörd\n"), &out, &errb); code != exitOK {
		t.Errorf("8 characters (10 bytes): exit %d %s", code, errb.String())
	}
}

// check's summary names what a household set up: each list with its kind
// and source, each group with its clients, lists and schedule, where the
// dashboard listens, and the dashboard's changes over the file (a line
// edited into no name is counted, not fatal).
func TestCheckSummaryShowsListsGroupsAndWeb(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nxdns.toml")
	list := filepath.Join(dir, "ads.txt")
	if err := os.WriteFile(list, []byte("ads.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[[upstreams]]
url = "tls://127.0.0.1:8853"
tls_name = "dns.test"
[web]
listen = "127.0.0.1:8053"
[filter]
state_dir = %q
[[filter.lists]]
name = "ads"
path = %q
[[filter.lists]]
name = "tracking"
url = "https://lists.example/tracking.txt"
[[filter.groups]]
name = "kids"
clients = ["192.168.1.0/28"]
lists = ["tracking"]
schedule = [{from = "21:00", to = "07:00"}]
`, dir, list)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-block.txt"), []byte("# blocked\nvideo.example\n<b>not a name</b>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := nxdns(t, "check", "--config", path)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"dashboard changes over this file", "  block video.example\n", "1 lines that are no name are skipped",
		"ads (block)  " + list, "tracking (block)  https://lists.example/tracking.txt",
		"group kids: 192.168.1.0/28 → tracking, 1 schedule windows", "web:       127.0.0.1:8053"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
