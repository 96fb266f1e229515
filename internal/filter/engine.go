// Package filter is the policy stage (docs/design.md#filtering): blocklists and
// allowlists in the common formats, compiled into one compact hashed set,
// applied per client group and schedule, with pause, explain, downloads
// that keep the last good copy, and CNAME-cloaking checks on answers.
//
// The Engine is long-lived (internal/app owns it): the loaded lists, the
// pause state and the download state survive configuration reloads, and
// the rule set is rebuilt only when the list configuration changes. Each
// configuration generation gets a cheap Stage with its own Policy.
package filter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/safefile"
)

// Options are what an Engine needs besides the configuration.
type Options struct {
	Logger *zap.Logger
	// LookupHost resolves a list URL's host through nxdns's upstreams (the
	// pool or a forward zone), never through nxdns's own listeners, so a
	// list download cannot loop through the filter. Nil uses only IP
	// literals.
	LookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time
}

// Engine holds the rule set and everything that must outlive a reload.
type Engine struct {
	log        *zap.Logger
	lookupHost func(ctx context.Context, host string) ([]netip.Addr, error)
	now        func() time.Time
	ownClock   bool // Options.Now was given (tests): queries are judged by it, not by their arrival
	client     *httpClient

	set    atomic.Pointer[Set]
	pauses pauses
	allow  allowed // names allowed from the dashboard (allow.go)
	nta    ntaSet  // DNSSEC negative trust anchors set from the dashboard (nta.go)
	block  allowed // names blocked from the dashboard (block.go)
	// overrides are the group switches changed from the dashboard
	// (overrides.go); servicesBlocked and safeSearched count by catalogue
	// index and by engine (services.go).
	overrides       overrides
	servicesBlocked [catalog.MaxServices]atomic.Uint64
	safeSearched    [8]atomic.Uint64
	// onChange is told of every dashboard-state change made here
	// (replicate.go); nil: nobody listens.
	onChange atomic.Pointer[func(key, value string)]

	blocked [MaxLists]atomic.Uint64 // by list bit

	mu      sync.Mutex // guards the configuration and list state; never held while parsing
	build   sync.Mutex // serialises rebuilds
	update  sync.Mutex // serialises Update
	cfg     config.Filter
	bits    map[string]int
	lists   map[string]*listState // by name
	hint    int                   // the last build's rule count
	stop    context.CancelFunc    // ends the download loops of cfg
	loops   sync.WaitGroup
	changed chan struct{} // a download brought a new copy: rebuild
	done    chan struct{} // closed by Close
	builder sync.WaitGroup
}

// listState is one list's load and download state.
type listState struct {
	cfg      config.FilterList
	bit      int
	report   Report
	loaded   time.Time // when the copy in use was fetched or read; zero: never
	err      string    // the last failure, "" after a success
	failures atomic.Uint64
	failing  bool // a failure episode is running (logged once)
	meta     meta
	seen     fileStamp // a path list's file as the last rebuild read it, or tried to
	// fetching serialises this list's downloads: the refresh loop's and
	// a "refresh now" (refresh.go) never write its file at once.
	fetching sync.Mutex
	// moved: the copy on disk came from another URL (the configuration
	// changed it): the next download is not held to that copy's size
	// (the shrink gate), it is a different list.
	moved bool
}

// timeOf is the moment a query is judged at (schedules, pauses): its
// arrival, which the server has read already, unless the engine has a clock
// of its own.
func (e *Engine) timeOf(ev *query.Event) time.Time {
	if e.ownClock || ev.Time.IsZero() {
		return e.now()
	}
	return ev.Time
}

// New makes an engine with no lists; Update gives it its configuration.
func New(o Options) *Engine {
	e := &Engine{
		log:        o.Logger,
		lookupHost: o.LookupHost,
		now:        o.Now,
		bits:       map[string]int{},
		lists:      map[string]*listState{},
		changed:    make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	e.block.what = "blocked"
	if e.log == nil {
		e.log = zap.NewNop()
	}
	if e.now == nil {
		e.now = time.Now
	} else {
		e.ownClock = true
	}
	e.client = newHTTPClient(e.lookupHost)
	e.set.Store(NewBuilder(0).Build())
	e.builder.Go(e.rebuildLoop)
	return e
}

// Bits assigns each list name its bit, keeping the bits of names already
// known, so a Policy built for a new configuration agrees with the set of
// the running one for every list both have.
func (e *Engine) Bits(lists []config.FilterList) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	// Forget names neither the serving lists nor these have, so reloads
	// that rename lists never run out of the 63 bits.
	for name := range e.bits {
		if _, serving := e.lists[name]; !serving && !slices.ContainsFunc(lists, func(l config.FilterList) bool { return l.Name == name }) {
			delete(e.bits, name)
		}
	}
	used := map[int]bool{}
	for _, l := range lists {
		if b, ok := e.bits[l.Name]; ok {
			used[b] = true
		}
	}
	for _, l := range lists {
		if _, ok := e.bits[l.Name]; ok {
			continue
		}
		for b := 0; b < inlineBit; b++ {
			if !used[b] && !e.bitTaken(b) {
				e.bits[l.Name], used[b] = b, true
				break
			}
		}
	}
	out := make(map[string]int, len(lists))
	for _, l := range lists {
		if b, ok := e.bits[l.Name]; ok {
			out[l.Name] = b
		}
	}
	return out
}

func (e *Engine) bitTaken(b int) bool {
	for _, x := range e.bits {
		if x == b {
			return true
		}
	}
	return false
}

// listsKey is the part of the configuration the rule set depends on.
func listsKey(f config.Filter) config.Filter {
	return config.Filter{Lists: f.Lists, Block: f.Block, Allow: f.Allow, RefreshHours: f.RefreshHours, StateDir: f.StateDir,
		MaxNamesPerList: f.MaxNamesPerList, MaxNames: f.MaxNames}
}

// Update applies a configuration. When its lists, inline rules, state
// directory or refresh interval differ from the running ones, or a local
// list's file was edited since it was read (localFileEdited), the rule set
// is rebuilt from the files on disk (the last good copies) and the
// downloads restart; otherwise nothing happens, and the loaded lists and
// their download state stay as they are. The disk copies are local files
// bounded by MaxListBytes, so Update returns once the new set serves (1 to
// 4.5 s per million names on the development machine, docs/performance.md);
// the old set serves until then.
func (e *Engine) Update(cfg config.Filter) {
	e.update.Lock()
	defer e.update.Unlock()
	e.Bits(cfg.Lists)
	e.mu.Lock()
	if reflect.DeepEqual(listsKey(cfg), listsKey(e.cfg)) && len(e.lists) == len(cfg.Lists) && e.stop != nil {
		edited := e.localFileEdited()
		e.mu.Unlock()
		if edited {
			e.rebuild() // the downloads and their state are untouched
		}
		return
	}
	if e.stop != nil {
		e.stop()
	}
	e.mu.Unlock()
	e.loops.Wait()
	e.useAllowFile(cfg.StateDir)
	e.useNTAFile(cfg.StateDir)
	e.useSwitchesFile(cfg.StateDir)
	e.mu.Lock()
	e.cfg = cfg
	old := e.lists
	e.lists = map[string]*listState{}
	for _, l := range cfg.Lists {
		st := &listState{cfg: l, bit: e.bits[l.Name]}
		if o, ok := old[l.Name]; ok && o.cfg == l {
			st.loaded, st.err, st.meta, st.report = o.loaded, o.err, o.meta, o.report
			st.failures.Store(o.failures.Load())
			st.failing = o.failing
			st.seen = o.seen
		}
		if l.URL != "" {
			m := readMeta(e.metaPath(l.Name))
			st.meta = metaFor(m, l.URL)
			st.moved = m.URL != "" && m.URL != l.URL
		}
		e.lists[l.Name] = st
	}
	e.mu.Unlock()
	e.rebuild()
	e.mu.Lock()
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	for _, st := range e.lists {
		if st.cfg.URL != "" {
			e.loops.Go(func() { e.downloadLoop(ctx, st) })
		}
	}
	e.mu.Unlock()
}

// Close stops the downloads.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.stop != nil {
		e.stop()
	}
	e.mu.Unlock()
	e.loops.Wait()
	close(e.done)
	e.builder.Wait()
}

// rebuildLoop rebuilds the set when a download stored a new copy, so
// several lists finishing together cost one rebuild.
func (e *Engine) rebuildLoop() {
	for {
		select {
		case <-e.done:
			return
		case <-e.changed:
			e.rebuild()
		}
	}
}

func (e *Engine) signalChanged() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// rebuild builds a new set from each list's file and the inline rules,
// beside the serving one, and swaps it in. A list whose file cannot be used
// now is left out only if no earlier copy of it was ever loaded; otherwise
// the whole rebuild is abandoned and the serving set (which holds that
// list's last good rules) stays. Rebuilds are serialised by e.build; the
// parsing runs without e.mu, so scrapes, health and the API never wait for
// it (and the query path never waits for anything: it reads e.set).
func (e *Engine) rebuild() {
	e.build.Lock()
	defer e.build.Unlock()
	type job struct {
		st     *listState
		path   string
		allow  bool
		loaded bool
		seen   fileStamp // the list's stamp before this rebuild, put back if it is abandoned
	}
	e.mu.Lock()
	var jobs []job
	for _, name := range e.sortedNames() {
		st := e.lists[name]
		path, seen := st.cfg.Path, st.seen
		if st.cfg.URL != "" {
			path = e.listPath(name)
		} else {
			// Before the read, so an edit during it is seen by the next
			// reload; whether the read works or not, so a broken file is
			// tried again only once it is edited (localFileEdited).
			st.seen = stampOf(path)
		}
		jobs = append(jobs, job{st: st, path: path, allow: st.cfg.IsAllow(), loaded: !st.loaded.IsZero(), seen: seen})
	}
	block, allow, hint := e.cfg.Block, e.cfg.Allow, e.hint
	perList, total := namesCaps(e.cfg)
	e.mu.Unlock()

	start := e.now()
	// Parsing leaves a little garbage per line, and the Go collector lets
	// the heap grow to twice what is live before it collects: during a
	// rebuild the live part is the serving set plus the new one, so collect
	// sooner and keep the refresh's peak near that (docs/performance.md).
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	b := NewBuilder(hint + hint/8)
	reports := map[*listState]Report{}
	type failure struct {
		st  *listState
		err error
	}
	var failed []failure
	for _, j := range jobs {
		items, regexes := b.Mark()
		dropped, names, capped := 0, 0, 0
		// The lines the names caps left out: a hosts line names several
		// names, and one line's names may be cut at the cap (its line is
		// still taken). Once a cap is met every later name is over it.
		line, lastLoaded, lastCapped, cappedLines := 0, 0, 0, 0
		rep, err := parseFile(j.path, func(r Rule) {
			if r.Kind != Regex {
				// The names caps: this list's first perList names, and
				// none past total in all (docs/filter.md "Names caps").
				if names >= perList || items+names >= total {
					capped++
					if line != lastCapped {
						lastCapped = line
						if line != lastLoaded {
							cappedLines++
						}
					}
					return
				}
				names++
				lastLoaded = line
			}
			if !b.Add(j.st.bit, j.allow, r) {
				dropped++
			}
		}, func() { line++ })
		leaveOut(&rep, ReasonManyRegexes, dropped, dropped)
		leaveOut(&rep, ReasonNamesCap, cappedLines, capped)
		rep.NamesOverCap = capped
		if capped > 0 && err == nil {
			e.log.Warn("list truncated at the names cap: its later names are not loaded", zap.String("list", j.st.cfg.Name),
				zap.Int("names_loaded", names), zap.Int("names_left_out", capped),
				zap.Int("max_names_per_list", perList), zap.Int("max_names", total))
		}
		if err != nil {
			b.Truncate(items, regexes)
			if j.st.cfg.URL != "" && errors.Is(err, os.ErrNotExist) {
				continue // never downloaded yet: the first download fills it
			}
			failed = append(failed, failure{j.st, fmt.Errorf("loading %s: %w", j.path, err)})
			if j.loaded {
				e.mu.Lock()
				for _, f := range failed {
					e.fail(f.st, f.err)
				}
				// Only the failing file is marked tried: another list's
				// edit read in this attempt was not applied, so the next
				// reload must still see it.
				for _, other := range jobs {
					if other.st != j.st {
						other.st.seen = other.seen
					}
				}
				e.mu.Unlock()
				e.log.Warn("list rebuild abandoned: keeping the rules in use", zap.String("list", j.st.cfg.Name))
				return
			}
			continue
		}
		reports[j.st] = rep
	}
	inline := func(lines []string, allow bool) {
		for _, line := range lines {
			rep := ParseLine(line, func(r Rule) { b.Add(inlineBit, allow, r) })
			if rep.Rejected > 0 || rep.IgnoredTotal() > 0 {
				e.log.Warn("inline filter rule not taken", zap.String("rule", line), zap.Bool("allow", allow), zap.String("reason", rep.Problem()))
			}
		}
	}
	inline(block, false)
	inline(allow, true)
	n := b.Len()
	set := b.Build()

	e.mu.Lock()
	e.hint = n
	e.set.Store(set)
	for _, f := range failed {
		e.fail(f.st, f.err)
	}
	for st, rep := range reports {
		st.report = rep
		if st.cfg.Path != "" {
			st.loaded = e.now()
			e.succeed(st)
		} else if st.loaded.IsZero() {
			st.loaded = st.meta.Fetched
			if st.loaded.IsZero() {
				st.loaded = modTime(e.listPath(st.cfg.Name))
			}
		}
		e.log.Info("list loaded", zap.String("list", st.cfg.Name), zap.Int("rules", rep.Rules), zap.Int("lines_taken", rep.Taken),
			zap.Int("lines_ignored", rep.IgnoredTotal()), zap.Any("ignored", rep.Ignored), zap.Int("lines_rejected", rep.Rejected))
	}
	e.mu.Unlock()
	// The old set is garbage now: return its pages to the kernel at once,
	// so a refresh does not leave the process at the peak of two sets.
	debug.FreeOSMemory()
	e.log.Info("filter rules swapped in", zap.Int("names", set.Names()), zap.Int("regexes", len(set.regexes)),
		zap.Duration("took", e.now().Sub(start)))
}

// leaveOut takes rules the parser counted as taken out of rep, and the
// lines none of whose rules are left, as ignored for why.
func leaveOut(rep *Report, why Reason, lines, rules int) {
	if rules == 0 {
		return
	}
	rep.Taken, rep.Rules = rep.Taken-lines, rep.Rules-rules
	if lines == 0 {
		return
	}
	if rep.Ignored == nil {
		rep.Ignored = map[Reason]int{}
	}
	rep.Ignored[why] += lines
}

// namesCaps are cfg's names caps; a zero (a configuration built in code,
// not loaded) is the default.
func namesCaps(cfg config.Filter) (perList, total int) {
	perList, total = cfg.MaxNamesPerList, cfg.MaxNames
	if perList <= 0 {
		perList = config.DefaultMaxNamesPerList
	}
	if total <= 0 {
		total = config.DefaultMaxNames
	}
	return perList, total
}

func (e *Engine) sortedNames() []string {
	names := make([]string, 0, len(e.lists))
	for _, l := range e.cfg.Lists {
		if _, ok := e.lists[l.Name]; ok {
			names = append(names, l.Name)
		}
	}
	return names
}

// fail records a failure of st: counted every time, logged once per
// episode. The caller holds e.mu.
func (e *Engine) fail(st *listState, err error) {
	st.failures.Add(1)
	st.err = err.Error()
	if !st.failing {
		st.failing = true
		e.log.Warn("list refresh failed; keeping the last good copy", zap.String("list", st.cfg.Name), zap.Error(err))
	}
}

func (e *Engine) succeed(st *listState) {
	st.err = ""
	if st.failing {
		st.failing = false
		e.log.Info("list refresh recovered", zap.String("list", st.cfg.Name))
	}
}

// parseFile parses a list file: opened by safefile.Open, so only a regular
// file within the parser's size cap is read, and a FIFO or a device fails
// at once instead of hanging the reload (docs/robustness.md).
// next, when not nil, is called before each line (parse).
func parseFile(path string, emit func(Rule), next func()) (Report, error) {
	f, err := safefile.Open(path, listCap)
	if errors.Is(err, safefile.ErrTooLarge) {
		return Report{}, ErrTooBig
	}
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	return parse(f, emit, next)
}

func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// fileStamp tells one version of a file from another without reading it.
// Modification time and size alone miss an edit that keeps both (`cp -p`,
// `rsync -a` with a name swapped for one as long); the inode change time
// cannot be set back by a tool, and a new file (a symlink moved to another
// Nix store path, a rename over the old one) has another device or inode.
type fileStamp struct {
	dev, ino   uint64
	mod, ctime int64 // Unix nanoseconds
	size       int64
}

// stampOf is path's stamp now, through symlinks; a file that cannot be
// stat'ed has the zero stamp.
func stampOf(path string) fileStamp {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return fileStamp{}
	}
	return fileStamp{
		dev: uint64(st.Dev), ino: st.Ino, // Dev is narrower on some platforms
		mod: st.Mtim.Nano(), ctime: st.Ctim.Nano(), size: st.Size,
	}
}

// localFileEdited reports whether a path list's file differs from the one
// the last rebuild read or tried: a reload (SIGHUP) reads local lists
// again, as the configuration reference promises, even when the
// configuration itself is unchanged (an operator edits the list, then
// reloads). A file that failed (gone, HTML, too big) is tried again only
// once it changes, so a broken list does not cost a rebuild on every
// reload; the rules in use stay meanwhile. Downloaded lists are not looked
// at: their copies change only by a download, which rebuilds by itself.
// Called with e.mu held.
func (e *Engine) localFileEdited() bool {
	for _, st := range e.lists {
		if st.cfg.Path != "" && stampOf(st.cfg.Path) != st.seen {
			return true
		}
	}
	return false
}

// listPath is where a downloaded list's last good copy lives.
func (e *Engine) listPath(name string) string {
	return filepath.Join(e.cfg.StateDir, name+".list")
}

func (e *Engine) metaPath(name string) string {
	return filepath.Join(e.cfg.StateDir, name+".meta.json")
}

// interval is the refresh interval with up to 10 % jitter, so a household's
// nxdns instances (and the list hosts' other users) do not all come at once.
func (e *Engine) interval() time.Duration {
	base := time.Duration(e.cfg.RefreshHours) * time.Hour
	return base + time.Duration(rand.Int64N(int64(base/10)+1))
}

// ListStatus is one list's state for the API, the metrics and health.
type ListStatus struct {
	Name     string         `json:"name"`
	Kind     string         `json:"kind"`
	Source   string         `json:"source"` // the URL or the path
	Rules    int            `json:"rules"`
	Taken    int            `json:"lines_taken"`
	Ignored  map[Reason]int `json:"lines_ignored,omitempty"`
	Rejected int            `json:"lines_rejected"`
	Loaded   time.Time      `json:"loaded,omitzero"` // when the copy in use was fetched; zero: never loaded
	Error    string         `json:"last_error,omitempty"`
	Failures uint64         `json:"refresh_failures"`
	Blocked  uint64         `json:"blocked"`
	// NamesOverCap is how many of the list's names the names caps left
	// out of the copy in use (Ignored counts the lines none of whose names
	// is left); 0 when it loaded whole.
	NamesOverCap int `json:"names_over_cap"`
}

// Snapshot is the engine's state for metrics and health.
type Snapshot struct {
	Lists   []ListStatus
	Refresh time.Duration // the configured refresh interval
	Now     time.Time
	Inline  uint64 // queries blocked by filter.block
	// Services is the queries blocked by each catalogue service, by id,
	// for the services that blocked any; SafeSearch the queries each
	// engine's safe search answered, by engine (services_api.go).
	Services   map[string]uint64
	SafeSearch map[string]uint64
}

// Snapshot returns every list's state.
func (e *Engine) Snapshot() Snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := Snapshot{Refresh: time.Duration(e.cfg.RefreshHours) * time.Hour, Now: e.now(), Inline: e.blocked[inlineBit].Load(),
		Services: e.servicesBlockedByID(), SafeSearch: e.SafeSearched()}
	for _, name := range e.sortedNames() {
		st := e.lists[name]
		src := st.cfg.URL
		if src == "" {
			src = st.cfg.Path
		}
		kind := st.cfg.Kind
		if kind == "" {
			kind = config.ListBlock
		}
		s.Lists = append(s.Lists, ListStatus{
			Name: name, Kind: kind, Source: redactURL(src), Rules: st.report.Rules, Taken: st.report.Taken,
			Ignored: st.report.Ignored, Rejected: st.report.Rejected, Loaded: st.loaded, Error: st.err,
			Failures: st.failures.Load(), Blocked: e.blocked[st.bit].Load(), NamesOverCap: st.report.NamesOverCap,
		})
	}
	return s
}

// Stale lists the lists that have never loaded or whose copy is older than
// three refresh intervals (docs/design.md#filtering: /api/health is then degraded).
func (s Snapshot) Stale() []string {
	var out []string
	for _, l := range s.Lists {
		if l.Loaded.IsZero() {
			out = append(out, l.Name+" (never loaded)")
		} else if s.Refresh > 0 && strings.HasPrefix(l.Source, "http") && s.Now.Sub(l.Loaded) > 3*s.Refresh {
			out = append(out, fmt.Sprintf("%s (%s old)", l.Name, s.Now.Sub(l.Loaded).Truncate(time.Minute)))
		}
	}
	return out
}
