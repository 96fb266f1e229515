package history

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// rowsIn counts the rows a history serves (at most 500: these tests keep
// a few).
func rowsIn(t *testing.T, h *History) int {
	t.Helper()
	p, err := h.Search(context.Background(), Filter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(p.Rows)
}

// rowsInFile opens path as a history of its own and counts its rows.
func rowsInFile(t *testing.T, path string) int {
	t.Helper()
	h := Open(Options{Path: path, MaxBytes: 64 << 20, MaxAge: 30 * 24 * time.Hour, Flush: time.Hour})
	defer h.Close()
	if p := h.Problem(); p != "" {
		t.Fatalf("%s: %s", path, p)
	}
	return rowsIn(t, h)
}

func optsOf(h *History) Options { return h.opts }

func TestReconfigure_newPathFlushesTheBufferToTheOldFileAndOpensTheNew(t *testing.T) {
	c := &clock{now: t0}
	a, b := filePath(t), filePath(t)
	h := openTest(t, a, c, nil)
	for i := range 3 {
		h.Record(event(t0, i)) // buffered: the flush interval is an hour
	}
	o := optsOf(h)
	o.Path = b
	h.Reconfigure(o)
	if p := h.Problem(); p != "" || h.InMemory() {
		t.Fatalf("after the move: problem %q, in memory %v", p, h.InMemory())
	}
	for i := range 2 {
		h.Record(event(t0, 10+i))
	}
	if got := rowsIn(t, h); got != 2 {
		t.Fatalf("the running history serves %d rows, want the new file's 2", got)
	}
	h.Close()
	if got := rowsInFile(t, a); got != 3 {
		t.Errorf("old file holds %d rows, want the 3 buffered before the move", got)
	}
	if got := rowsInFile(t, b); got != 2 {
		t.Errorf("new file holds %d rows, want 2", got)
	}
}

func TestReconfigure_memoryToFileWritesTheBufferedEventsToTheFile(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, "", c, nil)
	for i := range 4 {
		h.Record(event(t0, i))
	}
	path := filePath(t)
	o := optsOf(h)
	o.Path = path
	h.Reconfigure(o)
	if h.InMemory() || h.Problem() != "" {
		t.Fatalf("in memory %v, problem %q", h.InMemory(), h.Problem())
	}
	h.Close()
	if got := rowsInFile(t, path); got != 4 {
		t.Fatalf("file holds %d rows, want the 4 buffered in memory", got)
	}
}

func TestReconfigure_fileToMemoryKeepsTheBufferInTheFile(t *testing.T) {
	c := &clock{now: t0}
	path := filePath(t)
	h := openTest(t, path, c, nil)
	h.Record(event(t0, 1))
	o := optsOf(h)
	o.Path = ""
	h.Reconfigure(o)
	if !h.InMemory() || h.Problem() != "" {
		t.Fatalf("in memory %v, problem %q", h.InMemory(), h.Problem())
	}
	h.Record(event(t0, 2))
	if got := rowsIn(t, h); got != 1 {
		t.Fatalf("memory serves %d rows, want 1", got)
	}
	if got := rowsInFile(t, path); got != 1 { // closed by the move: openable again
		t.Fatalf("file holds %d rows, want 1", got)
	}
}

func TestReconfigure_unopenablePathDegradesThenAReloadRetries(t *testing.T) {
	c := &clock{now: t0}
	a := filePath(t)
	h := openTest(t, a, c, nil)
	h.Record(event(t0, 1))
	bad := filepath.Join(t.TempDir(), "missing-dir", "history.db")
	o := optsOf(h)
	o.Path = bad
	h.Reconfigure(o)
	if h.Problem() == "" || !h.InMemory() {
		t.Fatalf("problem %q, in memory %v: want degraded, in memory", h.Problem(), h.InMemory())
	}
	if !h.Snapshot().Degraded {
		t.Error("Snapshot not degraded")
	}
	h.Record(event(t0, 2))
	h.Flush()
	if got := rowsIn(t, h); got != 1 {
		t.Errorf("degraded history serves %d rows, want the 1 recorded since", got)
	}
	if got := rowsInFile(t, a); got != 1 {
		t.Errorf("old file holds %d rows, want the 1 buffered before", got)
	}

	// The operator fixes the directory and reloads the same file.
	if err := os.MkdirAll(filepath.Dir(bad), 0o755); err != nil {
		t.Fatal(err)
	}
	h.Record(event(t0, 3))
	h.Reconfigure(o)
	if p := h.Problem(); p != "" || h.InMemory() {
		t.Fatalf("after the fix: problem %q, in memory %v", p, h.InMemory())
	}
	h.Close()
	if got := rowsInFile(t, bad); got != 1 {
		t.Errorf("new file holds %d rows, want the 1 buffered while degraded", got)
	}
}

func TestReconfigure_ageBudgetAppliesAtOnce(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, filePath(t), c, nil)
	h.Record(event(t0.Add(-10*24*time.Hour), 1))
	h.Record(event(t0, 2))
	h.Flush()
	if got := rowsIn(t, h); got != 2 {
		t.Fatalf("%d rows before", got)
	}
	o := optsOf(h)
	o.MaxAge = 5 * 24 * time.Hour
	h.Reconfigure(o)
	if got := rowsIn(t, h); got != 1 {
		t.Fatalf("%d rows after max_days went to 5, want the recent one", got)
	}
}

func TestReconfigure_smallerByteBudgetPrunesAndBoundsTheFile(t *testing.T) {
	const big, small = 16 << 20, 2 << 20
	path := filePath(t)
	c := &clock{now: t0}
	h := openTest(t, path, c, func(o *Options) { o.MaxBytes = big })
	n := 0
	fill := func(rounds int) {
		for range rounds {
			for range 2000 {
				h.Record(event(c.now, n))
				n++
			}
			h.Flush()
			c.now = c.now.Add(time.Minute)
		}
	}
	fill(20) // about 4 MB
	before, _ := os.Stat(path)
	if before.Size() <= small {
		t.Fatalf("file %d bytes: the test did not pass the smaller budget", before.Size())
	}
	o := optsOf(h)
	o.MaxBytes = small
	h.Reconfigure(o)
	if s := h.Snapshot(); s.UsedBytes > small || s.Pruned == 0 {
		t.Fatalf("after the new budget: %d bytes used, %d pruned; budget %d", s.UsedBytes, s.Pruned, small)
	}
	fill(20)
	after, _ := os.Stat(path)
	if after.Size() > before.Size() {
		t.Errorf("file grew from %d to %d bytes under the smaller budget", before.Size(), after.Size())
	}
	if s := h.Snapshot(); s.UsedBytes > small || s.WriteErrors != 0 {
		t.Errorf("%d bytes used (budget %d), %d write errors", s.UsedBytes, small, s.WriteErrors)
	}
}

func TestReconfigure_newFlushIntervalRestartsTheTicker(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, filePath(t), c, nil) // an hour between flushes
	h.Record(event(t0, 1))
	o := optsOf(h)
	o.Flush = 10 * time.Millisecond
	h.Reconfigure(o)
	testutil.WaitFor(t, "the buffered event flushed at the new interval", 5*time.Second, func() bool { return h.Snapshot().Pending == 0 })
}

// TestReconfigure_recordNeverWaitsForTheSwap: opening the new file waits
// a second for another holder's lock; Record (the query path) goes on
// meanwhile, each call in far less than that, and no event is lost: each
// is in the old file (buffered before the swap began) or buffered for the
// store that replaced it.
func TestReconfigure_recordNeverWaitsForTheSwap(t *testing.T) {
	c := &clock{now: t0}
	locked := filePath(t)
	openTest(t, locked, c, nil) // holds the file's lock
	old := filePath(t)
	h := openTest(t, old, c, nil)
	o := optsOf(h)
	o.Path = locked
	var wg sync.WaitGroup
	started := time.Now()
	wg.Go(func() { h.Reconfigure(o) })
	var worst time.Duration
	n := 0
	for time.Since(started) < 700*time.Millisecond && n < 400 {
		t1 := time.Now()
		h.Record(event(t0, n))
		worst = max(worst, time.Since(t1))
		n++
		time.Sleep(time.Millisecond) // paces the queries; at most 400 of them
	}
	wg.Wait()
	if took := time.Since(started); took < 900*time.Millisecond {
		t.Fatalf("the swap took %v: the file was not locked, the test proves nothing", took)
	}
	if worst > 100*time.Millisecond {
		t.Errorf("a Record took %v during the swap", worst)
	}
	if h.Problem() == "" {
		t.Error("a locked file did not degrade the history")
	}
	pending := h.Snapshot().Pending
	if stored := rowsInFile(t, old); pending+stored != n || pending == 0 {
		t.Errorf("%d events pending and %d in the old file, want all %d recorded, most of them pending", pending, stored, n)
	}
}
