package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/safefile"
)

// SwitchesFile is the file under filter.state_dir that keeps the switches
// turned on or off from the dashboard (or POST /api/filter/groups/switch)
// across restarts. A list's files are NAME.list and NAME.meta.json, so no
// list name can collide with it.
const SwitchesFile = "dashboard-switches.json"

// Bounds of the switch overrides: a household has a few groups; the caps
// keep a script or a damaged file from growing memory without bound.
const (
	maxOverrideGroups   = 256
	maxSwitchesBytes    = 1 << 20
	maxOverrideGroupLen = 64
)

// Override is one group's switches changed at run time, over its
// configuration: true turns a service (or an engine's safe search) on for
// the group, false off, whatever the configuration says; a switch not
// named follows the configuration.
type Override struct {
	Services   map[string]bool `json:"services,omitempty"`
	SafeSearch map[string]bool `json:"safe_search,omitempty"`
}

// compiledOverride is an Override as bit sets, for the query path.
type compiledOverride struct {
	svcOn, svcOff   svcSet
	safeOn, safeOff uint8
}

type overrideMap map[string]*compiledOverride

// overrides is the switches changed at run time, by group name (a layer
// over the configuration, like the names allowed from the dashboard in
// allow.go). It belongs to the Engine, so it survives reloads; with a state
// directory it is kept in SwitchesFile, so it survives restarts. An
// override of a group the configuration no longer has is kept and applies
// again if the group comes back.
//
// Guarantee: the query path reads it without a lock (one atomic load; the
// maps are replaced whole on every change); changes and file writes are
// serialised by mu, and the file is replaced atomically.
type overrides struct {
	compiled atomic.Pointer[overrideMap]
	mu       sync.Mutex
	groups   map[string]Override // the source of compiled; guarded by mu
	path     string
}

// load returns the compiled overrides; nil when there are none.
func (o *overrides) load() overrideMap {
	if m := o.compiled.Load(); m != nil {
		return *m
	}
	return nil
}

func compileOverride(ov Override) *compiledOverride {
	c := &compiledOverride{}
	cat := index().cat
	for id, on := range ov.Services {
		if i := cat.Index(id); i >= 0 {
			if on {
				c.svcOn.add(i)
			} else {
				c.svcOff.add(i)
			}
		}
	}
	for e, on := range ov.SafeSearch {
		if on {
			c.safeOn |= engineBit(e)
		} else {
			c.safeOff |= engineBit(e)
		}
	}
	return c
}

// store makes groups the overrides in force; the caller holds mu.
func (o *overrides) store(groups map[string]Override) {
	o.groups = groups
	m := overrideMap{}
	for name, ov := range groups {
		m[name] = compileOverride(ov)
	}
	o.compiled.Store(&m)
}

// errSwitch is a switch request naming something that does not exist.
var errSwitch = errors.New("switch")

// set changes one switch of group: kind is "service" or "safe_search",
// state true (on), false (off) or nil (back to the configuration). It
// reports whether anything changed.
func (o *overrides) set(group, kind, id string, state *bool) (bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next := map[string]Override{}
	for g, ov := range o.groups {
		next[g] = Override{Services: maps.Clone(ov.Services), SafeSearch: maps.Clone(ov.SafeSearch)}
	}
	ov := next[group]
	m := &ov.Services
	if kind == "safe_search" {
		m = &ov.SafeSearch
	}
	old, had := (*m)[id]
	if state == nil {
		if !had {
			return false, nil
		}
		delete(*m, id)
	} else {
		if had && old == *state {
			return false, nil
		}
		if _, known := next[group]; !known && len(next) >= maxOverrideGroups {
			return false, fmt.Errorf("%w: switches of %d groups already changed", errSwitch, maxOverrideGroups)
		}
		if *m == nil {
			*m = map[string]bool{}
		}
		(*m)[id] = *state
	}
	if len(ov.Services) == 0 && len(ov.SafeSearch) == 0 {
		delete(next, group)
	} else {
		next[group] = ov
	}
	o.store(next)
	return true, o.save()
}

// snapshot returns a copy of the overrides.
func (o *overrides) snapshot() map[string]Override {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]Override{}
	for g, ov := range o.groups {
		out[g] = Override{Services: maps.Clone(ov.Services), SafeSearch: maps.Clone(ov.SafeSearch)}
	}
	return out
}

// use makes path the overrides' file. The overrides in it replace none set
// since start (a changed state directory keeps them, and writes them to
// the new file); a missing file is an empty one; an unreadable or damaged
// one is reported and left as it is, the overrides in memory still apply.
func (o *overrides) use(path string) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if path == o.path {
		return 0, nil
	}
	o.path = path
	if path == "" {
		return 0, nil
	}
	from, err := readSwitchesFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("reading %s: %w", path, err)
	}
	next := maps.Clone(o.groups)
	if next == nil {
		next = map[string]Override{}
	}
	for g, ov := range from {
		if _, set := next[g]; !set && len(next) < maxOverrideGroups {
			next[g] = ov
		}
	}
	o.store(next)
	if len(o.groups) > len(from) {
		return len(from), o.save()
	}
	return len(from), nil
}

// save writes the overrides to the file; the caller holds mu.
func (o *overrides) save() error {
	if o.path == "" {
		return nil
	}
	b, err := json.MarshalIndent(o.groups, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(o.path, bytes.NewReader(append(b, '\n')), -1); err != nil {
		return fmt.Errorf("writing %s: %w", o.path, err)
	}
	return nil
}

// readSwitchesFile reads a switches file with safefile.ReadFile (a regular
// file of at most maxSwitchesBytes, never a FIFO: docs/design.md#file-reads).
// Services and engines the catalogue does not have (a newer binary's, an
// edit) are dropped, and so are groups past the cap.
func readSwitchesFile(path string) (map[string]Override, error) {
	b, err := safefile.ReadFile(path, maxSwitchesBytes)
	if err != nil {
		return nil, err
	}
	var raw map[string]Override
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("not a switches file: %w", err)
	}
	out := map[string]Override{}
	cat := index().cat
	for _, g := range slices.Sorted(maps.Keys(raw)) {
		if len(out) >= maxOverrideGroups || g == "" || len(g) > maxOverrideGroupLen {
			continue
		}
		var ov Override
		for id, on := range raw[g].Services {
			if _, ok := cat.Lookup(id); ok {
				if ov.Services == nil {
					ov.Services = map[string]bool{}
				}
				ov.Services[id] = on
			}
		}
		for e, on := range raw[g].SafeSearch {
			if slices.Contains(catalog.Engines, e) {
				if ov.SafeSearch == nil {
					ov.SafeSearch = map[string]bool{}
				}
				ov.SafeSearch[e] = on
			}
		}
		if len(ov.Services) > 0 || len(ov.SafeSearch) > 0 {
			out[g] = ov
		}
	}
	return out, nil
}

// useSwitchesFile points the overrides at stateDir's SwitchesFile ("":
// memory only).
func (e *Engine) useSwitchesFile(stateDir string) {
	e.useStateFile(stateDir, SwitchesFile, "switches changed from the dashboard", "groups", e.overrides.use)
}

// useStateFile points one of the dashboard's state files (file under
// stateDir; "": memory only) at its set with use, and logs what it loaded
// or why it could not, as what; unit names what use counts.
func (e *Engine) useStateFile(stateDir, file, what, unit string, use func(path string) (int, error)) {
	path := ""
	if stateDir != "" {
		path = filepath.Join(stateDir, file)
	}
	n, err := use(path)
	if err != nil {
		e.log.Warn(what+" not read or not saved", zap.Error(err))
	} else if n > 0 {
		e.log.Info(what+" loaded", zap.String("file", path), zap.Int(unit, n))
	}
}
