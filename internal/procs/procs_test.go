package procs

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestPolicy_busyWindowsInARowOnOneProcessorGiveEveryProcessor(t *testing.T) {
	p := policy{one: true}
	for i, used := range []float64{upAt - 0.01, upAt, upAt - 0.01, upAt} {
		if one, changed := p.step(used); !one || changed {
			t.Fatalf("window %d at %.2f on one = (%v, %v), want to stay on one", i, used, one, changed)
		}
	}
	if one, changed := p.step(upAt); one || !changed {
		t.Fatalf("second window in a row at %.2f on one = (%v, %v), want every processor", upAt, one, changed)
	}
}

func TestPolicy_backToOneOnlyAfterCalmWindowsInARow(t *testing.T) {
	var p policy
	for i := 1; i < calmWindows; i++ {
		if one, _ := p.step(0.1); one {
			t.Fatalf("on one after %d calm windows, want %d", i, calmWindows)
		}
	}
	// A busy window restarts the count.
	if one, _ := p.step(downAt); one {
		t.Fatal("on one after a window at downAt")
	}
	for i := 1; i < calmWindows; i++ {
		if one, _ := p.step(0.1); one {
			t.Fatalf("on one after %d calm windows since a busy one, want %d", i, calmWindows)
		}
	}
	if one, changed := p.step(0.1); !one || !changed {
		t.Fatalf("after %d calm windows = (%v, %v), want one processor", calmWindows, one, changed)
	}
}

func TestPolicy_loadBetweenTheThresholdsStaysPut(t *testing.T) {
	mid := (downAt + upAt) / 2
	for _, start := range []bool{true, false} {
		p := policy{one: start}
		for i := range 100 {
			if one, changed := p.step(mid); changed || one != start {
				t.Fatalf("starting on one=%v, window %d at %.2f CPUs: (%v, %v), want no change", start, i, mid, one, changed)
			}
		}
	}
}

// recorder is processors that remembers each setting.
type recorder struct {
	set     []string
	follows int
}

func (r *recorder) one()    { r.set = append(r.set, "one") }
func (r *recorder) all()    { r.set = append(r.set, "all") }
func (r *recorder) follow() { r.follows++ }

// meter is a CPU clock the test advances.
type meter struct{ used time.Duration }

func (m *meter) cpu() time.Duration { return m.used }

// stepper drives a governor window by window: each call counts share of a
// CPU over one window and ends it.
func stepper(procs processors) (*governor, func(share float64)) {
	m := &meter{}
	now := time.Unix(1_000_000, 0)
	g := &governor{procs: procs, cpu: m.cpu, log: zap.NewNop(), last: now}
	return g, func(share float64) {
		m.used += time.Duration(share * float64(window))
		now = now.Add(window)
		g.endWindow(now)
	}
}

func TestGovernor_followsTheProcessesCPUUse(t *testing.T) {
	rec := &recorder{}
	_, tick := stepper(rec)
	for range calmWindows {
		tick(0.2)
	}
	if !slices.Equal(rec.set, []string{"one"}) {
		t.Fatalf("after %d windows at 0.2 CPUs: %v, want [one]", calmWindows, rec.set)
	}
	tick(0.5) // below upAt: stays
	tick(0.9)
	tick(0.9)
	if !slices.Equal(rec.set, []string{"one", "all"}) {
		t.Fatalf("after windows at 0.5, 0.9 and 0.9 CPUs on one: %v, want [one all]", rec.set)
	}
}

func TestGovernor_runGivesTheDefaultBackWhenItEnds(t *testing.T) {
	rec := &recorder{}
	g, _ := stepper(rec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.run(ctx, time.Now(), nil)
	if !slices.Equal(rec.set, []string{"all"}) {
		t.Fatalf("run ended with %v, want [all]", rec.set)
	}
}

// TestGovernor_setsTheRealRuntime drives the runtime's own GOMAXPROCS: one
// processor when calm, the default when busy.
func TestGovernor_setsTheRealRuntime(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0)) // the test binary's own setting (-cpu) back
	runtime.SetDefaultGOMAXPROCS()
	want := runtime.GOMAXPROCS(0)
	_, tick := stepper(runtimeProcessors{})
	for range calmWindows {
		tick(0)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("calm: GOMAXPROCS %d, want 1", got)
	}
	tick(1.5)
	tick(1.5)
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("busy: GOMAXPROCS %d, want the default %d", got, want)
	}
}

func TestCPUTime_countsTheProcessesWork(t *testing.T) {
	before := cpuTime()
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for cpuTime()-before < 20*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning counted %v of CPU", cpuTime()-before)
		}
		for i := range 100_000 {
			x += i
		}
	}
	_ = x
}

func TestGovern_leavesTheOperatorsGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "3")
	before := runtime.GOMAXPROCS(0)
	core, logs := observer.New(zap.InfoLevel)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); Govern(ctx, zap.New(core)) }()
	select {
	case <-done: // returned without governing, ctx still live
	case <-time.After(10 * time.Second):
		t.Fatal("Govern ran with GOMAXPROCS set")
	}
	if n := logs.FilterMessage("go processors: GOMAXPROCS is set, not governed").Len(); n != 1 {
		t.Fatalf("%d lines saying GOMAXPROCS is set, want 1", n)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("GOMAXPROCS %d after Govern, want %d untouched", got, before)
	}
}

// A window in which the kernel dropped datagrams counts as busy, whatever
// the CPU time says.
func TestGovernor_pressedWindowsCountAsBusy(t *testing.T) {
	defer pressed.Store(false)
	rec := &recorder{}
	_, tick := stepper(rec)
	for range calmWindows {
		tick(0.1)
	}
	Pressed()
	tick(0.1)
	Pressed()
	tick(0.1)
	if !slices.Equal(rec.set, []string{"one", "all"}) {
		t.Fatalf("after two pressed windows at 0.1 CPUs on one: %v, want [one all]", rec.set)
	}
	for range calmWindows - 1 {
		tick(0.1)
	}
	Pressed()
	tick(0.1) // restarts the calm count
	for range calmWindows - 1 {
		tick(0.1)
	}
	if len(rec.set) != 2 {
		t.Fatalf("settings %v: a pressed window did not restart the calm count", rec.set)
	}
}

// A watcher hears the choice of the moment, then each change, and nothing
// once stopped.
func TestWatch_hearsEachChangeUntilStopped(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer publish(false)
	var heard []bool
	stop := Watch(func(one bool) { heard = append(heard, one) })
	_, tick := stepper(runtimeProcessors{})
	for range calmWindows {
		tick(0)
	}
	tick(1.5)
	tick(1.5)
	stop()
	for range calmWindows {
		tick(0)
	}
	if want := []bool{false, true, false}; !slices.Equal(heard, want) {
		t.Fatalf("heard %v, want %v", heard, want)
	}
}

// Only a value the runtime honours is the operator's number; a broken one
// (empty, zero, negative, not a number) leaves the server governed.
func TestOperatorSet_onlyWhatTheRuntimeHonours(t *testing.T) {
	for v, want := range map[string]bool{"3": true, "1": true, "": false, "0": false, "-2": false, "abc": false, "2.5": false, " 2": false} {
		if got := operatorSet(v); got != want {
			t.Errorf("operatorSet(%q) = %v, want %v", v, got, want)
		}
	}
}

// On every processor, each window that changes nothing looks at the
// runtime's own count; on one, there is nothing to follow.
func TestGovernor_followsTheDefaultEachWindowOnEveryProcessor(t *testing.T) {
	rec := &recorder{}
	_, tick := stepper(rec)
	for range 3 {
		tick(0.9)
	}
	if rec.follows != 3 {
		t.Fatalf("%d follows after 3 busy windows on every processor, want 3", rec.follows)
	}
	for range calmWindows {
		tick(0)
	}
	before := rec.follows
	tick(0)
	if rec.follows != before {
		t.Errorf("a window on one processor followed the default")
	}
}

// A runtime default of one processor (CPU affinity or a quota cut after
// start) is one processor to the watchers too, so a UDP group steers.
func TestRuntimeProcessors_followTellsTheWatchersTheRuntimesCount(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer publish(false)
	publish(false)
	var heard []bool
	stop := Watch(func(one bool) { heard = append(heard, one) })
	defer stop()
	runtime.GOMAXPROCS(1)
	runtimeProcessors{}.follow()
	runtime.GOMAXPROCS(2)
	runtimeProcessors{}.follow()
	runtimeProcessors{}.follow() // no change, nothing heard
	if !slices.Equal(heard, []bool{false, true, false}) {
		t.Errorf("watcher heard %v, want [false true false]", heard)
	}
}
