package filter

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// AllowFile is the file under filter.state_dir that keeps the names
// allowed from the dashboard across restarts. A list's files are
// NAME.list and NAME.meta.json, so no list name can collide with it.
const AllowFile = "dashboard-allow.txt"

// DashboardList is the list name the check endpoint reports for a name
// allowed from the dashboard.
const DashboardList = "dashboard"

// Bounds of the runtime allow set: a household allows a few names by hand;
// the caps keep a script calling the endpoint in a loop, or a damaged file,
// from growing memory or the state directory without bound.
const (
	MaxAllowed      = 10000
	maxAllowedBytes = 1 << 20
)

// ErrAllowFull is what Allow returns when MaxAllowed names are allowed.
var ErrAllowFull = fmt.Errorf("already %d names allowed from the dashboard: remove some first", MaxAllowed)

// allowed is the names allowed at run time (the dashboard's "allow" action):
// each name and every name below it, answered as if an allowlist had it,
// over every list and group (docs/design.md#filter-matching: an allow rule wins over every block
// rule). It belongs to the Engine, so it survives reloads; with a state
// directory it is also kept in AllowFile, so it survives restarts.
//
// Guarantee: the query path reads it without a lock (one atomic load; the
// map is replaced whole on every change, never modified in place; an empty
// set costs that one load). Changes and file writes are serialised by mu,
// and the file is replaced atomically (a temporary file and a rename), so
// a crash leaves the old list or the new one.
type allowed struct {
	names atomic.Pointer[map[string]struct{}]
	mu    sync.Mutex
	path  string // AllowFile in the state directory; "": kept in memory only
	// what is the file's first line's word for its names: "allowed"
	// (AllowFile) or "blocked" (BlockFile, block.go).
	what string
}

// match returns the allowed name that covers name (name itself or a
// parent), if any. name is lower-case without its trailing dot.
func (a *allowed) match(name string) (string, bool) {
	m := a.names.Load()
	if m == nil || len(*m) == 0 {
		return "", false
	}
	for n := name; ; {
		if _, ok := (*m)[n]; ok {
			return n, true
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			return "", false
		}
		n = n[i+1:]
	}
}

// list returns the allowed names, sorted.
func (a *allowed) list() []string {
	out := []string{} // never nil: the API answers [], not null
	if m := a.names.Load(); m != nil {
		out = append(out, slices.Sorted(maps.Keys(*m))...)
	}
	return out
}

// use makes path the set's file: the names in it join the ones already
// allowed (a changed state directory keeps what was allowed before), and
// when that added any, the file is written back with all of them. A
// missing file is an empty one; an unreadable or oversized one is reported
// and left as it is, the names in memory still apply.
func (a *allowed) use(path string) (loaded int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if path == a.path {
		return 0, nil
	}
	a.path = path
	if path == "" {
		return 0, nil
	}
	from, err := readAllowFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	next := a.copy()
	for _, n := range from {
		if len(next) >= MaxAllowed {
			break
		}
		next[n] = struct{}{}
	}
	a.names.Store(&next)
	if cur := len(from); len(next) > cur {
		return len(from), a.save(next)
	}
	return len(from), nil
}

// add allows name (already normalised); it reports whether it was new.
func (a *allowed) add(name string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := a.copy()
	if _, ok := next[name]; ok {
		return false, nil
	}
	if len(next) >= MaxAllowed {
		return false, ErrAllowFull
	}
	next[name] = struct{}{}
	a.names.Store(&next)
	return true, a.save(next)
}

// remove forgets name; it reports whether it was allowed.
func (a *allowed) remove(name string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	next := a.copy()
	if _, ok := next[name]; !ok {
		return false, nil
	}
	delete(next, name)
	a.names.Store(&next)
	return true, a.save(next)
}

// copy is a new map with the current names; the caller holds mu.
func (a *allowed) copy() map[string]struct{} {
	next := map[string]struct{}{}
	if cur := a.names.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	return next
}

// save writes names to the file; the caller holds mu. Without a state
// directory there is nothing to write.
func (a *allowed) save(names map[string]struct{}) error {
	if a.path == "" {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("# Names " + cmp.Or(a.what, "allowed") + " from the nxdns dashboard, one a line (each with the names below it).\n")
	for _, n := range slices.Sorted(maps.Keys(names)) {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	if err := writeFileAtomic(a.path, &b, -1); err != nil {
		return fmt.Errorf("writing %s: %w", a.path, err)
	}
	return nil
}

// readAllowFile reads an allow (or block) file with safefile.ReadFile (a
// regular file of at most maxAllowedBytes, never a FIFO:
// docs/design.md#file-reads), one name a line, '#' comments; a line that
// is not a name is skipped, and logged by the caller (use) with the count.
func readAllowFile(path string) ([]string, error) {
	names, _, err := readNamesFile(path)
	return names, err
}

// readNamesFile is readAllowFile with the count of lines skipped.
func readNamesFile(path string) (names []string, skipped int, err error) {
	b, err := safefile.ReadFile(path, maxAllowedBytes)
	if err != nil {
		return nil, 0, err
	}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if n, ok := normalise(line, Subtree); ok {
			names = append(names, n)
		} else {
			skipped++
		}
	}
	return names, skipped, nil
}

// useAllowFile points the runtime allow set at stateDir's AllowFile ("":
// memory only).
func (e *Engine) useAllowFile(stateDir string) {
	e.useStateFile(stateDir, AllowFile, "names allowed from the dashboard", "names", e.allow.use)
	e.useBlockFile(stateDir)
}

// Allow allows name (and every name below it) for every client, over every
// list, until Unallow; it returns the name as it is kept and whether it
// was new. The change applies even when it could not be saved (the error
// says so).
func (e *Engine) Allow(name string) (string, bool, error) {
	n, ok := normalise(strings.TrimSpace(name), Subtree)
	if !ok {
		return "", false, errNotAName
	}
	added, err := e.allow.add(n)
	if added {
		e.log.Info("name allowed from the dashboard", zap.String("name", n), zap.Error(err))
		e.stateChanged(allowKey+n, "1")
	}
	return n, added, err
}

// Unallow ends Allow for name; it reports whether name was allowed.
func (e *Engine) Unallow(name string) (string, bool, error) {
	n, ok := normalise(strings.TrimSpace(name), Subtree)
	if !ok {
		return "", false, errNotAName
	}
	removed, err := e.allow.remove(n)
	if removed {
		e.log.Info("name no longer allowed from the dashboard", zap.String("name", n), zap.Error(err))
		e.stateChanged(allowKey+n, "")
	}
	return n, removed, err
}

// Allowed lists the names allowed from the dashboard, sorted.
func (e *Engine) Allowed() []string { return e.allow.list() }

var errNotAName = errors.New("name: not a domain name")
