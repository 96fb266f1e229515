package history

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A file the precheck calls damaged is moved aside, a fresh store starts
// in its place, Problem names the move; only the newest keepCorrupt moved
// files stay. A precheck that could not decide (a timeout) leaves the file
// in place and the history in memory. The real check in a child process is
// tested through the binary (cmd/nxdns TestRun_damagedHistoryFileIsMovedAsideAndDNSServes).
func TestOpen_damagedFileIsMovedAsideAndAFreshStoreStarts(t *testing.T) {
	path := filePath(t)
	openDamagedTimes(t, path, keepCorrupt+2, func(i int, h *History) {
		if h.InMemory() {
			t.Fatalf("open %d: in memory (%s), want a fresh file", i, h.Problem())
		}
		if p := h.Problem(); !strings.Contains(p, "page 7: garbage") || !strings.Contains(p, "moved aside to "+path+".corrupt-") {
			t.Errorf("open %d: Problem = %q, want the damage and the move", i, p)
		}
	})
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != keepCorrupt || !strings.HasSuffix(aside[len(aside)-1], t0.Add(time.Duration(keepCorrupt+1)*time.Second).Format("20060102T150405.000Z")) {
		t.Errorf("moved-aside files %v, want the newest %d", aside, keepCorrupt)
	}

	undecided := func(string) error { return errors.New("checking took longer than 60s; left in place") }
	if err := os.WriteFile(path, []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := openTest(t, path, &clock{now: t0}, func(o *Options) { o.Precheck = undecided })
	if !h.InMemory() || !strings.Contains(h.Problem(), "left in place") {
		t.Errorf("undecided check: in memory %v, Problem %q", h.InMemory(), h.Problem())
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "not a store" {
		t.Errorf("undecided check changed the file: %q, %v", b, err)
	}
}

// The newest keepCorrupt moved-aside files stay whatever the path holds: a
// directory named with pattern characters ("nxdns[1]") once made the
// clean-up's glob match nothing, so moved files piled up; and a file
// beside them that only starts like one (history.db.corrupt-notes) is not
// nxdns's to remove.
func TestOpen_movedAsideFilesAreBoundedWhateverThePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nxdns[1]")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "history.db")
	notes := path + ".corrupt-notes"
	if err := os.WriteFile(notes, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	openDamagedTimes(t, path, keepCorrupt+2, func(int, *History) {})
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var aside []string
	for _, e := range entries {
		if e.Name() != filepath.Base(notes) {
			aside = append(aside, e.Name())
		}
	}
	if len(aside) != keepCorrupt {
		t.Errorf("moved-aside files %v, want the newest %d", aside, keepCorrupt)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "mine" {
		t.Errorf("%s: %q, %v; want it untouched", notes, b, err)
	}
}

// openDamagedTimes opens path n times, a second apart, each time on a file
// the precheck calls damaged, and hands each history to check before it is
// closed and its fresh file removed.
func openDamagedTimes(t *testing.T, path string, n int, check func(i int, h *History)) {
	t.Helper()
	c := &clock{now: t0}
	damaged := func(string) error { return fmt.Errorf("%w: page 7: garbage", ErrCorrupt) }
	for i := range n {
		if err := os.WriteFile(path, []byte("not a store"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.now = t0.Add(time.Duration(i) * time.Second)
		h := Open(Options{Path: path, MaxBytes: 8 << 20, MaxAge: time.Hour, Now: c.Now, Precheck: damaged})
		check(i, h)
		h.Close()
		os.Remove(path)
	}
}
