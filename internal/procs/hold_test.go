package procs

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// activate makes g the running governor for one test.
func activate(t *testing.T, g *governor) {
	t.Helper()
	active.Store(g)
	t.Cleanup(func() { active.Store(nil) })
}

// A hold gives a calm server every processor before Hold returns, keeps
// them through any number of calm windows, and once released the usual
// calm windows bring it back to one.
func TestHold_givesEveryProcessorAtOnceUntilReleased(t *testing.T) {
	rec := &recorder{}
	g, tick := stepper(rec)
	activate(t, g)
	for range calmWindows {
		tick(0)
	}
	release := Hold()
	t.Cleanup(release) // when a check fails first: no hold may outlive the test
	if !slices.Equal(rec.set, []string{"one", "all"}) {
		t.Fatalf("after Hold on one processor: %v, want [one all]", rec.set)
	}
	for range 3 * calmWindows {
		tick(0)
	}
	if len(rec.set) != 2 {
		t.Fatalf("settings %v: calm windows put a held server on one processor", rec.set)
	}
	release()
	release() // a second call does nothing
	if n := holds.Load(); n != 0 {
		t.Fatalf("%d holds outstanding after one Hold released twice, want 0", n)
	}
	for range calmWindows - 1 {
		tick(0)
	}
	if len(rec.set) != 2 {
		t.Fatalf("settings %v: back to one before %d calm windows after the release", rec.set, calmWindows)
	}
	tick(0)
	if !slices.Equal(rec.set, []string{"one", "all", "one"}) {
		t.Fatalf("after the release and %d calm windows: %v, want [one all one]", calmWindows, rec.set)
	}
}

// Without a governor (the operator set GOMAXPROCS) a hold changes nothing
// and is only counted.
func TestHold_withoutAGovernorOnlyCounts(t *testing.T) {
	release := Hold()
	t.Cleanup(release)
	if n := holds.Load(); n != 1 {
		t.Errorf("%d holds outstanding, want 1", n)
	}
	release()
	if n := holds.Load(); n != 0 {
		t.Errorf("%d holds outstanding after the release, want 0", n)
	}
}

// stateProcs are processors that remember the setting and count the
// switches to one, for checks from other goroutines.
type stateProcs struct {
	isOne *atomic.Bool
	ones  *atomic.Int32
}

func (p stateProcs) one() { p.isOne.Store(true); p.ones.Add(1) }
func (p stateProcs) all() { p.isOne.Store(false) }

// The guarantee under -race: while windows end as fast as a loop can end
// them, and so put the server on one processor again and again between
// holds, every goroutine that holds finds it on every processor between
// Hold's return and its release.
func TestHold_guaranteeHoldsAgainstWindowsEndingMeanwhile(t *testing.T) {
	const wantOnes = 50
	var one atomic.Bool
	var ones atomic.Int32
	g, tick := stepper(stateProcs{&one, &ones})
	activate(t, g)
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		for {
			select {
			case <-stop:
				return
			default:
				tick(0)
			}
		}
	}()
	var wg sync.WaitGroup
	var violations atomic.Int32
	deadline := time.Now().Add(10 * time.Second)
	for range 2 {
		wg.Go(func() {
			for ones.Load() < wantOnes && time.Now().Before(deadline) {
				release := Hold()
				if one.Load() {
					violations.Add(1)
				}
				release()
				runtime.Gosched() // let calm windows pile up between holds
			}
		})
	}
	wg.Wait()
	close(stop)
	<-ticked
	if n := ones.Load(); n < wantOnes {
		t.Fatalf("the governor went to one processor %d times, want %d: the holds were never tested against it", n, wantOnes)
	}
	if n := violations.Load(); n != 0 {
		t.Errorf("%d holds found the server on one processor", n)
	}
	if n := holds.Load(); n != 0 {
		t.Errorf("%d holds outstanding at the end, want 0", n)
	}
}
