package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/nxdns/nxdns/internal/testutil"
)

// A damaged history file cannot take nxdns down, at start or at a reload
// that opens it (issue 30 item 7; docs/history.md, "Degraded, never DNS").
// Before the fix, garbage pages panicked inside bbolt's freelist walk at
// open, in a goroutine no recover reached, and a truncated file faulted on
// the memory map (SIGBUS): exit 2 either way, a crash loop under
// Restart=always. Now a child process checks the file first, the file is
// moved aside, a fresh store starts, DNS answers, and /api/health says so.
func TestRun_damagedHistoryFileIsMovedAsideAndDNSServes(t *testing.T) {
	damages := map[string]func(t *testing.T, path string){
		"garbage pages": garblePages,
		"truncated":     truncateHalf,
	}
	for name, damage := range damages {
		t.Run(name+"/start", func(t *testing.T) {
			dir := t.TempDir()
			hist := filepath.Join(dir, "history.db")
			writeHistoryFile(t, hist)
			damage(t, hist)
			n := startWithHistory(t, dir, hist)
			n.assertMovedAside(t, hist)
		})
		t.Run(name+"/reload", func(t *testing.T) {
			dir := t.TempDir()
			n := startWithHistory(t, dir, filepath.Join(dir, "first.db"))
			hist := filepath.Join(dir, "history.db")
			writeHistoryFile(t, hist)
			damage(t, hist)
			n.writeConfig(t, hist)
			if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			awaitLine(t, n.lines, "reloaded")
			n.assertMovedAside(t, hist)
		})
	}
}

// historyNode is a running nxdns with a history file.
type historyNode struct {
	cmd          *exec.Cmd
	lines        <-chan string
	cfgPath      string
	dnsPort, web uint16
}

// startWithHistory runs the binary with history.path = hist; the client's
// queries are refused at once (127.0.0.1 is outside dns.allow), so an
// answer shows DNS is served without any upstream.
func startWithHistory(t *testing.T, dir, hist string) *historyNode {
	t.Helper()
	n := &historyNode{cfgPath: filepath.Join(dir, "nxdns.toml"), dnsPort: testutil.FreePort(t), web: testutil.FreePort(t)}
	n.writeConfig(t, hist)
	n.cmd = exec.Command(binary, "run", "--config", n.cfgPath)
	stderr, err := n.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.cmd.Process.Signal(syscall.SIGTERM); n.cmd.Wait() }) //nolint:errcheck // cleanup
	n.lines = lineChan(stderr)
	awaitLine(t, n.lines, "serving")
	return n
}

func (n *historyNode) writeConfig(t *testing.T, hist string) {
	t.Helper()
	cfg := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
allow = ["10.0.0.0/8"]
[web]
listen = "127.0.0.1:%d"
[history]
path = %q
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "dot.test"
`, n.dnsPort, n.web, hist, testutil.FreePort(t))
	if err := os.WriteFile(n.cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// assertMovedAside checks that the process runs and answers, that hist was
// moved aside and a fresh file took its place, and that /api/health names
// the move.
func (n *historyNode) assertMovedAside(t *testing.T, hist string) {
	t.Helper()
	if got := refusedAnswers(t, fmt.Sprintf("127.0.0.1:%d", n.dnsPort), 20); got != 20 {
		t.Fatalf("%d of 20 queries answered", got)
	}
	aside, _ := filepath.Glob(hist + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("moved-aside files: %v, want one", aside)
	}
	if fi, err := os.Stat(hist); err != nil || fi.Size() == 0 {
		t.Errorf("no fresh store at %s: %v", hist, err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/health", n.web))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		History struct {
			Store   string `json:"store"`
			Problem string `json:"problem"`
		} `json:"history"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	if h.History.Store != "file" || !strings.Contains(h.History.Problem, "moved aside to "+aside[0]) {
		t.Errorf("/api/health history = %+v, want the file store and the move named", h.History)
	}
}

// historyCheckExit runs the hidden check on path: nil when it passes.
func historyCheckExit(t *testing.T, path string) error {
	out, err := exec.Command(binary, "history-check", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

// writeHistoryFile writes a bbolt file of a few MB (many pages, so damage
// past the meta pages meets the tree) in the layout's rows bucket.
func writeHistoryFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{NoFreelistSync: true, FreelistType: bolt.FreelistMapType}) // as nxdns writes it
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("rows"))
		if err != nil {
			return err
		}
		for i := range 20_000 {
			if err := b.Put(fmt.Appendf(nil, "%012d", i), []byte(strings.Repeat("v", 150))); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := historyCheckExit(t, path); err != nil {
		t.Fatalf("the undamaged file fails the check: %v", err)
	}
}

// garblePages overwrites the pages after the two meta pages with random
// bytes: the meta pages stay valid, so bbolt goes on to walk the tree.
func garblePages(t *testing.T, path string) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := make([]byte, 64*os.Getpagesize())
	r := rand.NewChaCha8([32]byte{30, 7})
	r.Read(junk)
	if _, err := f.WriteAt(junk, 2*int64(os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
}

// truncateHalf cuts the file to half its size: the meta pages still name
// pages past the end.
func truncateHalf(t *testing.T, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}
