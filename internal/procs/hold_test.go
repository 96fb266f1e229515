package procs

import (
	"runtime"
	"slices"
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

// stateProcs are processors that remember the setting and tell wentOne of
// each switch to one, for checks from other goroutines.
type stateProcs struct {
	isOne   *atomic.Bool
	wentOne chan struct{}
}

func (p stateProcs) one() {
	p.isOne.Store(true)
	select {
	case p.wentOne <- struct{}{}:
	default:
	}
}
func (p stateProcs) all()    { p.isOne.Store(false) }
func (p stateProcs) follow() {}

// Under -race, with windows ending as fast as a loop can end them on
// another goroutine: each hold is taken just after the governor went to
// one processor, and finds every processor on return and until its
// release, however many windows end meanwhile.
func TestHold_takesEveryProcessorFromAGovernorOnAnotherGoroutine(t *testing.T) {
	const holdsWanted = 50
	var one atomic.Bool
	procs := stateProcs{&one, make(chan struct{}, 1)}
	g, tick := stepper(procs)
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
	defer func() { close(stop); <-ticked }()
	timeout := time.After(10 * time.Second)
	for i := range holdsWanted {
		select {
		case <-procs.wentOne:
		case <-timeout:
			t.Fatalf("hold %d: the governor did not go to one processor within 10 s", i)
		}
		release := Hold()
		if one.Load() {
			t.Errorf("hold %d: on one processor after Hold returned", i)
		}
		for range 3 { // windows end meanwhile on the other goroutine
			runtime.Gosched()
			if one.Load() {
				t.Errorf("hold %d: on one processor before its release", i)
				break
			}
		}
		release()
	}
	if n := holds.Load(); n != 0 {
		t.Errorf("%d holds outstanding at the end, want 0", n)
	}
}
