// Package procs keeps nxdns on one Go processor while one is enough, and
// gives it the runtime's default (one per CPU) once the work needs more.
//
// Why: with a processor idle, Go's scheduler wakes a second thread to look
// for work each time the network wakes a reader, and that thread finds
// nothing and sleeps again. At cache-hit rates a query is a few
// microseconds of work, so those wake-ups were a sixth of what it cost:
// at 20 000 hits a second, 25.7 µs of CPU a query on two processors against
// 21.8 µs on one, and a tail that followed it when the clients shared the
// CPUs (docs/performance.md "One Go processor while one is enough"). A
// household's load is far below one CPU; a flood is not, and gets every
// processor within two or three windows, sooner if the kernel drops
// datagrams (Pressed).
//
// Jobs that use a CPU for a moment (a list rebuild, the cache file's
// encoding, a history query; hold.go) take every processor while they run
// (Hold) instead of waiting for the windows to notice them.
//
// What depends on the number asks for it when it matters: sizes fixed at
// start (one UDP socket per CPU) use Ceiling, taken before the governor
// runs; the history's flush paces itself while on one (history/pace.go);
// a UDP group steers to one socket (Watch).
package procs

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// The governor's rule (policy). Two windows are short enough that a load
// which needs more than one processor gets them before a client retries
// (1 s is the shortest stub timeout in common use); one is long enough
// that its tick costs nothing an idle Raspberry Pi would notice.
const (
	window = 200 * time.Millisecond
	// upAt, busyWindows: on one processor, this many windows in a row that
	// each used this much of a CPU give the server every processor. Past
	// it, queries start to queue behind each other on the one processor
	// more than the wake-ups cost. Two windows, not one: a machine that
	// stalls the process for a moment hands it a backlog, and one window's
	// catch-up is not a load.
	upAt        = 0.70
	busyWindows = 2
	// downAt, calmWindows: on every processor, this many windows in a row
	// each below this much of a CPU put the server back on one. A steady
	// load cannot flap between the two: it costs more on every processor
	// than on one (the wake-ups), so one that went up stays above downAt,
	// and one that came down is below upAt on one.
	downAt      = 0.65
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
	runs int  // windows in a row past the threshold that would change it
}

// step takes one window's CPU use, in CPUs, and reports whether the server
// is to run on one processor and whether that changed.
func (p *policy) step(used float64) (one, changed bool) {
	past, need := used < downAt, calmWindows
	if p.one {
		past, need = used >= upAt, busyWindows
	}
	if !past {
		p.runs = 0
		return p.one, false
	}
	p.runs++
	if p.runs < need {
		return p.one, false
	}
	p.one, p.runs = !p.one, 0
	return p.one, true
}

// pressed is set by Pressed and taken by the governor's next window.
var pressed atomic.Bool

// Pressed tells the governor that work is waiting which CPU time does not
// show: the kernel dropped datagrams at a full receive queue. On one
// processor that window counts as busy, so a flood that other processes'
// CPU use holds under upAt still gets every processor, and a steered UDP
// group (one socket's queue for every client) spreads again. Cheap enough
// to call for each drop seen.
func Pressed() {
	if !pressed.Load() {
		pressed.Store(true)
	}
}

// processors sets the runtime's processors: one, or the runtime's default;
// follow, called each window while on the default, reports a default that
// changed by itself.
type processors interface {
	one()
	all()
	follow()
}

// runtimeProcessors is the real runtime. all restores the default and its
// automatic updates (a changed CPU affinity or cgroup quota is followed
// again); one is a custom setting, which stops them until all. What the
// watchers hear is the count the runtime runs on: the default can be one
// processor too (`taskset` to one CPU after start, a quota cut to one),
// and then the readers would take turns on it just the same.
type runtimeProcessors struct{}

func (runtimeProcessors) one()    { runtime.GOMAXPROCS(1); publish(true) }
func (runtimeProcessors) all()    { runtime.SetDefaultGOMAXPROCS(); publishCount() }
func (runtimeProcessors) follow() { publishCount() }

// publishCount tells the watchers whether the runtime runs on one processor.
func publishCount() { publish(runtime.GOMAXPROCS(0) == 1) }

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
	log = log.Named("procs")
	if v := os.Getenv("GOMAXPROCS"); operatorSet(v) {
		log.Info("go processors: GOMAXPROCS is set, not governed", zap.String("GOMAXPROCS", v))
		return
	}
	if ceiling < 2 {
		log.Debug("go processors: one at start, not governed", zap.Int("processors", ceiling))
		return
	}
	log.Debug("go processors: governed", zap.Int("processors", ceiling))
	t := time.NewTicker(window)
	defer t.Stop()
	g := &governor{procs: runtimeProcessors{}, cpu: cpuTime, log: log}
	active.Store(g)
	defer active.Store(nil)
	g.run(ctx, time.Now(), t.C)
}

// operatorSet reports whether a GOMAXPROCS value sets the number: the
// runtime honours only a positive whole number and ignores anything else,
// and so does the governor.
func operatorSet(v string) bool {
	n, err := strconv.Atoi(v)
	return err == nil && n > 0
}

// governor applies the policy to the process's CPU use, window by window,
// and to holds (hold.go).
type governor struct {
	mu      sync.Mutex // guards p and the calls of procs: windows and holds both change them
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
	defer func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.p.one = false // a hold before Govern returns finds nothing to do
		g.procs.all()
	}()
	g.last, g.lastCPU = start, g.cpu()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			g.endWindow(now)
		}
	}
}

// endWindow ends the window at now: it measures the CPU the process used
// since the last one and applies the policy's answer.
func (g *governor) endWindow(now time.Time) {
	wall := now.Sub(g.last)
	if wall <= 0 {
		return
	}
	cpu := g.cpu()
	used := float64(cpu-g.lastCPU) / float64(wall)
	g.last, g.lastCPU = now, cpu
	g.mu.Lock()
	defer g.mu.Unlock()
	if pressed.Swap(false) || holds.Load() > 0 {
		used = max(used, upAt)
	}
	one, changed := g.p.step(used)
	if !changed {
		if !one {
			g.procs.follow()
		}
		return
	}
	if one {
		g.procs.one()
	} else {
		g.procs.all()
	}
	g.log.Debug("go processors", zap.Bool("one", one), zap.Float64("cpus_used", used))
}
