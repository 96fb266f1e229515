package filter

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// ErrNoSuchList is Refresh's error for a name that is no downloaded list.
var ErrNoSuchList = errors.New("no downloaded list")

// RefreshResult is one list's outcome of a "refresh now"
// (POST /api/filter/lists/refresh, `nxdns lists refresh`).
type RefreshResult struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Rules int    `json:"rules"`           // the copy in use afterwards
	Error string `json:"error,omitempty"` // why the last good copy was kept
}

// RefreshAnswer is what POST /api/filter/lists/refresh answers.
type RefreshAnswer struct {
	Lists []RefreshResult `json:"lists"`
}

// RefreshNow downloads name, or every downloaded list for "", now, in
// parallel, each as its refresh loop would (the same gates; a failure
// keeps the last good copy; a copy that did not change since is a 304),
// and returns when all are done (each bounded by the download timeout)
// and the set in use has them. A local file list is read again at every
// reload and is not refreshed here. The loops' own schedule is unchanged.
func (e *Engine) RefreshNow(ctx context.Context, name string) ([]RefreshResult, error) {
	e.mu.Lock()
	var names []string
	for _, n := range e.sortedNames() {
		if st := e.lists[n]; st.cfg.URL != "" && (name == "" || n == name) {
			names = append(names, n)
		}
	}
	e.mu.Unlock()
	if name != "" && len(names) == 0 {
		return nil, ErrNoSuchList
	}
	out := make([]RefreshResult, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			r := RefreshResult{Name: n, OK: true}
			if err := e.Refresh(ctx, n); err != nil {
				r.OK, r.Error = false, err.Error()
			}
			out[i] = r
		})
	}
	wg.Wait()
	// Rebuild here rather than wait for the rebuild loop, so the answer
	// (and the page reloaded after it) shows the copies in use. Rebuilds
	// are serialised; the loop's own, if any, costs one more.
	if slices.ContainsFunc(out, func(r RefreshResult) bool { return r.OK }) {
		e.rebuild()
	}
	e.mu.Lock()
	for i := range out {
		if st, ok := e.lists[out[i].Name]; ok {
			out[i].Rules = st.report.Rules
		}
	}
	e.mu.Unlock()
	e.log.Info("filter lists refreshed on request")
	return out, nil
}

func (e *Engine) handleRefresh(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	res, err := e.RefreshNow(r.Context(), name)
	if err != nil {
		httpError(w, http.StatusNotFound, "name: "+name+" is not a list with a url (a local file is read again at every reload)")
		return
	}
	writeJSON(w, RefreshAnswer{Lists: res})
}
