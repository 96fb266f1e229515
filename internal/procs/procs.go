// Package procs keeps nxdns on one Go processor while one is enough, and
// gives it the runtime's default (one per CPU) once the work needs more.
//
// Why: with a processor idle, Go's scheduler wakes a second thread to look
// for work each time the network wakes a reader, and that thread finds
// nothing and sleeps again. At cache-hit rates a query is a few
// microseconds of work, so those wake-ups were a sixth of what it cost:
// at 20 000 hits a second, 25.7 µs of CPU a query on two processors against
// 21.6 µs on one, and a tail that followed it when the clients shared the
// CPUs (docs/performance.md "One processor while one is enough"). A
// household's load is far below one CPU; a flood or a burst of misses is
// not, and gets every processor within a window.
//
// Nothing else in nxdns depends on the number: sizes fixed at start (one
// UDP socket per CPU) use Ceiling, taken before the governor runs.
package procs

import (
	"context"
	"os"
	"runtime"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The governor's rule (policy). One window is short enough that a load
// which needs more than one processor gets them before a client retries
// (1 s is the shortest stub timeout in common use), long enough that its
// tick costs nothing an idle Raspberry Pi would notice.
const (
	window = 200 * time.Millisecond
	// upAt: on one processor, a window that used this much of a CPU gives
	// the server every processor. Past it, queries start to queue behind
	// each other on the one processor more than the wake-ups cost.
	upAt = 0.70
	// downAt, calmWindows: on every processor, this many windows in a row
	// each below this much of a CPU put the server back on one. downAt is
	// below upAt by more than the wake-ups' share (about a sixth), so a
	// load between the two does not flap.
	downAt      = 0.55
	calmWindows = 10
)

// ceiling is GOMAXPROCS as the runtime chose it at start, before any
// governor lowered it.
var ceiling = runtime.GOMAXPROCS(0)

// Ceiling is the number of processors the runtime gave the process at
// start: for what is sized once (one UDP socket, with its reader, per CPU),
// which must not follow the governor's choice of the moment.
func Ceiling() int { return ceiling }

// policy is the governor's rule apart from clocks and the runtime: one
// window's CPU use in, whether to run on one processor out.
type policy struct {
	one  bool // on one processor now
	calm int  // windows in a row below downAt, while on every processor
}

// step takes one window's CPU use, in CPUs, and reports whether the server
// is to run on one processor and whether that changed.
func (p *policy) step(used float64) (one, changed bool) {
	switch {
	case p.one && used >= upAt:
		p.one, p.calm = false, 0
		return false, true
	case !p.one && used < downAt:
		p.calm++
		if p.calm >= calmWindows {
			p.one, p.calm = true, 0
			return true, true
		}
	case !p.one:
		p.calm = 0
	}
	return p.one, false
}

// processors sets the runtime's processors: one, or the runtime's default.
type processors interface {
	one()
	all()
}

// runtimeProcessors is the real runtime. all restores the default and its
// automatic updates (a changed CPU affinity or cgroup quota is followed
// again); one is a custom setting, which stops them until all.
type runtimeProcessors struct{}

func (runtimeProcessors) one() { runtime.GOMAXPROCS(1); publish(true) }
func (runtimeProcessors) all() { runtime.SetDefaultGOMAXPROCS(); publish(false) }

// cpuTime is the CPU time the process has used, user and system: a reader
// answering from the cache spends much of its time in the kernel, sending.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Govern runs the governor until ctx ends, then gives the runtime its
// default back. It governs nothing when the operator set GOMAXPROCS (their
// number stands) or the runtime's default is one processor.
func Govern(ctx context.Context, log *zap.Logger) {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		log.Info("go processors: GOMAXPROCS is set, not governed", zap.String("GOMAXPROCS", v))
		return
	}
	if ceiling < 2 {
		return
	}
	t := time.NewTicker(window)
	defer t.Stop()
	g := governor{procs: runtimeProcessors{}, cpu: cpuTime, log: log}
	g.run(ctx, time.Now(), t.C)
}

// governor applies the policy to the process's CPU use, window by window.
type governor struct {
	procs   processors
	cpu     func() time.Duration
	log     *zap.Logger
	p       policy // starts on every processor: start-up work (lists, the cache file) is not held to one
	last    time.Time
	lastCPU time.Duration
}

// run steps the policy at each tick until ctx ends, then gives the runtime
// its default back; start is when the first window began.
func (g *governor) run(ctx context.Context, start time.Time, ticks <-chan time.Time) {
	defer g.procs.all()
	g.last, g.lastCPU = start, g.cpu()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			g.window(now)
		}
	}
}

// window ends the window at now: it measures the CPU the process used
// since the last one and applies the policy's answer.
func (g *governor) window(now time.Time) {
	wall := now.Sub(g.last)
	if wall <= 0 {
		return
	}
	cpu := g.cpu()
	used := float64(cpu-g.lastCPU) / float64(wall)
	g.last, g.lastCPU = now, cpu
	one, changed := g.p.step(used)
	if !changed {
		return
	}
	if one {
		g.procs.one()
	} else {
		g.procs.all()
	}
	g.log.Debug("go processors", zap.Bool("one", one), zap.Float64("cpus_used", used))
}
