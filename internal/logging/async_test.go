package logging

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A sink that never drains (stderr to a stalled journald) costs dropped,
// counted lines and never blocks the logger (docs/design.md#log-never-blocks, issue 13 finding 2).
// Written synchronously, the 64 KiB pipe buffer fills after a few hundred
// lines and the loop below never ends.
func TestAsync_stalledSinkDropsAndCountsNeverBlocks(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	log := New(Options{Level: zap.NewAtomicLevelAt(zapcore.InfoLevel), Journal: true, Out: w, Async: true})
	before := Dropped()
	const lines = 3 * queueLines
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range lines {
			log.Info("query", zap.Int("i", i), zap.String("name", strings.Repeat("n", 200)))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("logging blocked on a sink that does not drain")
	}
	if Dropped()-before == 0 {
		t.Fatal("no line counted as dropped although the sink never drained")
	}
	start := time.Now()
	log.Sync()
	if d := time.Since(start); d > 3*syncTimeout {
		t.Errorf("Sync took %v on a stalled sink, bound %v", d, syncTimeout)
	}
	// Drain: what arrives are whole lines, in order.
	w.Close()
	sc := bufio.NewScanner(r)
	last := -1
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "<6>INFO") || !strings.HasSuffix(l, strings.Repeat("n", 200)+`"}`) {
			t.Fatalf("not a whole line: %.80q", l)
		}
		var i int
		if _, err := fmtSscan(l, &i); err != nil {
			t.Fatalf("line without its index: %.80q", l)
		}
		if i <= last {
			t.Fatalf("line %d after line %d: order lost", i, last)
		}
		last = i
	}
}

// Sync returns once the lines logged before it are written, so the last
// lines before exit are not lost on a sink that drains.
func TestAsync_syncFlushes(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	log := New(Options{Level: zap.NewAtomicLevelAt(zapcore.InfoLevel), Out: w, Async: true})
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "stopped") {
				break
			}
		}
		got <- b.String()
	}()
	log.Info("serving")
	log.Info("stopped")
	log.Sync()
	select {
	case s := <-got:
		if !strings.Contains(s, "serving") {
			t.Errorf("lines before Sync missing: %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("lines logged before Sync never arrived")
	}
}

// A sink that fails (EPIPE: the reader went away) drops and counts the line;
// the writer carries on. (Its own counter: the package's also counts what
// the other tests' writers still drop.)
func TestAsync_failingSinkCounts(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	var n atomic.Uint64
	aw := newAsyncWriter(w, &n)
	aw.Write([]byte("one\n"))
	aw.Sync()
	if n.Load() != 1 {
		t.Errorf("dropped %d lines on a closed pipe, want 1", n.Load())
	}
	aw.Write([]byte("two\n"))
	aw.Sync()
	if n.Load() != 2 {
		t.Errorf("dropped %d lines after the second, want 2: the writer must carry on", n.Load())
	}
}

// fmtSscan reads the "i" field of a line.
func fmtSscan(line string, i *int) (int, error) {
	k := strings.Index(line, `"i": `)
	if k < 0 {
		return 0, os.ErrNotExist
	}
	return fmt.Sscan(line[k+5:], i)
}
