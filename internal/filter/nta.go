package filter

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/safefile"
)

// Negative trust anchors set from the dashboard (docs/dnssec.md, RFC 7646):
// "stop validating this name for a while", kept like the names allowed from
// the dashboard (allow.go) — the Engine's, across reloads, and in NTAFile
// under filter.state_dir across restarts. Each ends by itself.

// NTAFile is the file under filter.state_dir that keeps them: one
// "NAME UNIX-SECONDS" a line, the second field when it ends.
const NTAFile = "dashboard-nta.txt"

// Bounds: an NTA is temporary (RFC 7646 §2), a week at most; a household
// sets a few.
const (
	MaxNTAs        = 1000
	MaxNTADuration = 7 * 24 * time.Hour
	maxNTABytes    = 1 << 16
)

// ErrNTAFull is what AddNTA returns when MaxNTAs are set.
var ErrNTAFull = fmt.Errorf("already %d negative trust anchors: remove some first", MaxNTAs)

type ntaSet struct {
	names atomic.Pointer[map[string]time.Time] // name (lower case, no trailing dot) → end
	mu    sync.Mutex
	path  string
}

// NTAActive reports whether a dashboard NTA covers name (with or without
// its trailing dot, any case) now. It takes no lock.
func (e *Engine) NTAActive(name string) bool {
	m := e.nta.names.Load()
	if m == nil || len(*m) == 0 {
		return false
	}
	now := e.now()
	for n := strings.ToLower(strings.TrimSuffix(name, ".")); ; {
		if end, ok := (*m)[n]; ok && now.Before(end) {
			return true
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			return false
		}
		n = n[i+1:]
	}
}

// NTA is one dashboard negative trust anchor.
type NTA struct {
	Name  string    `json:"name"`
	Until time.Time `json:"until"`
}

// NTAs lists the dashboard NTAs still running, by name.
func (e *Engine) NTAs() []NTA {
	out := []NTA{}
	if m := e.nta.names.Load(); m != nil {
		now := e.now()
		for _, n := range slices.Sorted(maps.Keys(*m)) {
			if end := (*m)[n]; now.Before(end) {
				out = append(out, NTA{Name: n, Until: end})
			}
		}
	}
	return out
}

// AddNTA stops validation of name and the names below it for d (at most
// MaxNTADuration); it returns the name as kept and when it ends. The NTA
// applies even when it could not be saved (the error says so).
func (e *Engine) AddNTA(name string, d time.Duration) (NTA, error) {
	n, ok := normalise(strings.TrimSpace(name), Subtree)
	if !ok {
		return NTA{}, errNotAName
	}
	end := e.now().Add(min(max(d, time.Minute), MaxNTADuration)).Truncate(time.Second)
	err := e.nta.change(e.now(), func(m map[string]time.Time) error {
		if _, ok := m[n]; !ok && len(m) >= MaxNTAs {
			return ErrNTAFull
		}
		m[n] = end
		return nil
	})
	if errors.Is(err, ErrNTAFull) {
		return NTA{}, err
	}
	e.log.Info("DNSSEC negative trust anchor set from the dashboard", zap.String("name", n), zap.Time("until", end), zap.Error(err))
	e.stateChanged(ntaKey+n, end.UTC().Format(time.RFC3339Nano))
	return NTA{Name: n, Until: end}, err
}

// RemoveNTA ends name's NTA; it reports whether there was one.
func (e *Engine) RemoveNTA(name string) (bool, error) {
	n, ok := normalise(strings.TrimSpace(name), Subtree)
	if !ok {
		return false, errNotAName
	}
	found := false
	err := e.nta.change(e.now(), func(m map[string]time.Time) error {
		_, found = m[n]
		delete(m, n)
		return nil
	})
	if found {
		e.log.Info("DNSSEC negative trust anchor removed from the dashboard", zap.String("name", n), zap.Error(err))
		e.stateChanged(ntaKey+n, "")
	}
	return found, err
}

// change applies f to a copy of the running NTAs (expired ones dropped),
// installs it and saves it.
func (s *ntaSet) change(now time.Time, f func(map[string]time.Time) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]time.Time{}
	if cur := s.names.Load(); cur != nil {
		for n, end := range *cur {
			if now.Before(end) {
				next[n] = end
			}
		}
	}
	if err := f(next); err != nil {
		return err
	}
	s.names.Store(&next)
	return s.save(next)
}

func (s *ntaSet) save(m map[string]time.Time) error {
	if s.path == "" {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("# DNSSEC negative trust anchors set from the nxdns dashboard: name and the Unix time it ends.\n")
	for _, n := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "%s %d\n", n, m[n].Unix())
	}
	if err := writeFileAtomic(s.path, &b, -1); err != nil {
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}

// useNTAFile points the dashboard NTAs at stateDir's NTAFile ("": memory
// only); the running ones still in the file's future join the ones set.
func (e *Engine) useNTAFile(stateDir string) {
	path := ""
	if stateDir != "" {
		path = filepath.Join(stateDir, NTAFile)
	}
	s := &e.nta
	s.mu.Lock()
	if path == s.path {
		s.mu.Unlock()
		return
	}
	s.path = path
	s.mu.Unlock()
	if path == "" {
		return
	}
	b, err := safefile.ReadFile(path, maxNTABytes)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		e.log.Warn("DNSSEC negative trust anchors from the dashboard not read", zap.Error(err))
		return
	}
	if cur := s.names.Load(); err != nil && (cur == nil || len(*cur) == 0) {
		return // no file and nothing to keep: none is written
	}
	err = s.change(e.now(), func(m map[string]time.Time) error {
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			if len(f) != 2 || strings.HasPrefix(f[0], "#") || len(m) >= MaxNTAs {
				continue
			}
			n, ok := normalise(f[0], Subtree)
			sec, err := strconv.ParseInt(f[1], 10, 64)
			if ok && err == nil {
				m[n] = time.Unix(sec, 0)
			}
		}
		return nil
	})
	if err != nil {
		e.log.Warn("DNSSEC negative trust anchors from the dashboard not saved", zap.Error(err))
	}
}

// NTAAnswer is the answer of POST and DELETE /api/dnssec/nta.
type NTAAnswer struct {
	Name      string    `json:"name"`
	Until     time.Time `json:"until,omitzero"` // POST: when it ends
	Changed   bool      `json:"changed"`
	SaveError string    `json:"save_error,omitempty"`
}

func (e *Engine) handleNTAs(w http.ResponseWriter, _ *http.Request) { writeJSON(w, e.NTAs()) }

// handleAddNTA is POST /api/dnssec/nta?name=NAME&hours=H (default 24; or
// minutes=M).
func (e *Engine) handleAddNTA(w http.ResponseWriter, r *http.Request) {
	d := 24 * time.Hour
	for _, u := range []struct {
		key  string
		unit time.Duration
	}{{"hours", time.Hour}, {"minutes", time.Minute}} { // minutes: the dashboard's buttons send them
		v := r.URL.Query().Get(u.key)
		if v == "" {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n <= 0 || time.Duration(n*float64(u.unit)) > MaxNTADuration {
			httpError(w, http.StatusBadRequest, fmt.Sprintf("%s: %q is not a number of %s from 0 to %g", u.key, v, u.key, float64(MaxNTADuration)/float64(u.unit)))
			return
		}
		d = time.Duration(n * float64(u.unit))
	}
	nta, err := e.AddNTA(r.URL.Query().Get("name"), d)
	if errors.Is(err, errNotAName) || errors.Is(err, ErrNTAFull) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := NTAAnswer{Name: nta.Name, Until: nta.Until, Changed: true}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}

// handleRemoveNTA is DELETE /api/dnssec/nta?name=NAME.
func (e *Engine) handleRemoveNTA(w http.ResponseWriter, r *http.Request) {
	found, err := e.RemoveNTA(r.URL.Query().Get("name"))
	if errors.Is(err, errNotAName) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := NTAAnswer{Name: strings.TrimSuffix(strings.ToLower(strings.TrimSpace(r.URL.Query().Get("name"))), "."), Changed: found}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}
