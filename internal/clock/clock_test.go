package clock

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// kernel is a fake of the kernel's status for one test.
type kernel struct {
	synced, ok atomic.Bool
}

func (k *kernel) read() (bool, bool) { return k.synced.Load(), k.ok.Load() }

func touch(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestRead_timesyncdDecidesWhenItRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "timesync")
	k := &kernel{}
	k.ok.Store(true)
	k.synced.Store(true) // the kernel says synced, but timesyncd, when present, is asked first
	src := Source{TimesyncDir: dir, Kernel: k.read}

	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := src.Read(); got != (Reading{Unsynchronized, "timesyncd"}) {
		t.Errorf("timesyncd running, not synced: %+v", got)
	}
	touch(t, filepath.Join(dir, "synchronized"))
	if got := src.Read(); got != (Reading{Synchronized, "timesyncd"}) {
		t.Errorf("timesyncd synced: %+v", got)
	}
}

// fine is a clock after Plausible.
func fine() time.Time { return Plausible.Add(24 * time.Hour) }

func TestRead_kernelWhenNoTimesyncd(t *testing.T) {
	k := &kernel{}
	src := Source{TimesyncDir: filepath.Join(t.TempDir(), "absent"), Kernel: k.read, Now: fine}
	if got := src.Read(); got != (Reading{State: Unknown}) {
		t.Errorf("kernel unreadable: %+v, want unknown", got)
	}
	k.ok.Store(true)
	// The kernel's flag alone, with a plausible clock and no time
	// service, is not reported: it stays set on a clock set by hand.
	if got := src.Read(); got != (Reading{State: Unknown}) {
		t.Errorf("kernel unsynced, clock plausible: %+v, want unknown", got)
	}
	k.synced.Store(true)
	if got := src.Read(); got != (Reading{Synchronized, "kernel"}) {
		t.Errorf("kernel synced: %+v", got)
	}
}

// A clock before Plausible is wrong whatever the kernel says, with or
// without a time service in sight.
func TestRead_implausibleClockIsUnsynchronized(t *testing.T) {
	k := &kernel{}
	k.ok.Store(true)
	past := func() time.Time { return time.Date(1970, 1, 1, 0, 2, 0, 0, time.UTC) }
	src := Source{TimesyncDir: filepath.Join(t.TempDir(), "absent"), Kernel: k.read, Now: past}
	if got := src.Read(); got != (Reading{Unsynchronized, "plausibility"}) {
		t.Errorf("clock in 1970, kernel unsynced: %+v", got)
	}
	if got := (Source{Now: past}).Read(); got != (Reading{Unsynchronized, "plausibility"}) {
		t.Errorf("clock in 1970, nothing else known: %+v", got)
	}
}

func TestRead_zeroSourceIsUnknown(t *testing.T) {
	if got := (Source{Now: fine}).Read(); got != (Reading{State: Unknown}) {
		t.Errorf("zero Source: %+v", got)
	}
}

// A file where the directory should be (or an unreadable directory) is not
// a running timesyncd.
func TestRead_timesyncdPathNotADirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timesync")
	touch(t, path)
	if got := (Source{TimesyncDir: path, Now: fine}).Read(); got != (Reading{State: Unknown}) {
		t.Errorf("a file at the directory's path: %+v, want unknown", got)
	}
}

func TestWatcher_reportsEachChangeOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "timesync")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		k := &kernel{}
		k.ok.Store(true)
		k.synced.Store(true)
		const every = 2 * time.Second
		w := NewWatcher(Source{TimesyncDir: dir, Kernel: k.read, Now: fine}, every)
		if got := w.Current(); got.State != Unsynchronized {
			t.Fatalf("before Run: %+v, want the first reading already there", got)
		}

		var mu sync.Mutex
		var changes [][2]Reading
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			w.Run(ctx, func(old, new Reading) {
				mu.Lock()
				changes = append(changes, [2]Reading{old, new})
				mu.Unlock()
			})
		}()
		step := func() {
			time.Sleep(every)
			synctest.Wait()
		}
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(changes)
		}

		step() // nothing changed: no call
		if n := count(); n != 0 {
			t.Fatalf("%d changes with nothing changed", n)
		}
		touch(t, filepath.Join(dir, "synchronized"))
		step()
		if n := count(); n != 1 || changes[0] != [2]Reading{{Unsynchronized, "timesyncd"}, {Synchronized, "timesyncd"}} {
			t.Fatalf("after the sync: %+v", changes)
		}
		if got := w.Current(); got != (Reading{Synchronized, "timesyncd"}) {
			t.Errorf("Current after the sync: %+v", got)
		}
		// timesyncd stops (its directory goes) while the kernel says
		// synced: a new source, the same state, no call.
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		step()
		step()
		if n := count(); n != 1 {
			t.Fatalf("a change of source alone was reported: %+v", changes)
		}
		k.ok.Store(false)
		step()
		if n := count(); n != 2 || changes[1] != [2]Reading{{Synchronized, "kernel"}, {State: Unknown}} {
			t.Fatalf("after the kernel became unreadable: %+v", changes)
		}
		cancel()
		<-done
	})
}
