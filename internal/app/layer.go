package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/dashboard"
	"github.com/nxdns/nxdns/internal/safefile"
	"github.com/nxdns/nxdns/internal/web"
)

// The dashboard's configuration layer (config.Layer; docs/dashboard.md
// "Manage"): lists added or switched off and groups made from the
// dashboard, kept in filter.state_dir and merged over the configuration
// file at every start and reload. The file is never written; the layer's
// file is, one entry at a time, under a.mu, so two browsers editing at
// once each replace whole entries: the last write wins per entry.

// layerState is what the App keeps of it: replaced whole, under a.mu, by
// every start and reload; read without the lock (a page must not wait for
// a reload).
type layerState struct {
	file config.Config     // the configuration file's (listen overrides applied), before the layer
	eff  config.Config     // the effective configuration the running generation has
	st   config.LayerState // the layer as read, and what was skipped
}

// withLayer merges the layer of file's state directory over file, and
// logs what it could not apply: a skipped entry or a damaged layer file is
// never a reason to stop (the daemon runs on the file's configuration and
// what of the layer validates).
func (a *App) withLayer(file config.Config) (config.Config, config.LayerState) {
	eff, st := config.LoadLayer(file)
	if st.Err != "" {
		a.log.Error("dashboard changes ignored: the layer file cannot be used; the configuration file alone applies", zap.String("error", st.Err))
	}
	for _, s := range st.Skips {
		a.log.Warn("dashboard change skipped", zap.String("item", s.Item), zap.String("reason", s.Reason))
	}
	return eff, st
}

// layerInfo is the layer, the file's configuration and the effective one,
// for the dashboard's pages.
func (a *App) layerInfo() (config.LayerState, config.Config, config.Config) {
	l := a.layer.Load()
	return l.st, l.file, l.eff
}

func layerJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func layerError(w http.ResponseWriter, code int, msg string) {
	layerJSON(w, code, map[string]string{"error": msg})
}

// layerRoutes adds the layer's API: read it, and change one entry at a
// time (web.Mutating: a login session's CSRF token, or a control token).
func (a *App) layerRoutes(s *web.Server) {
	s.Handle("GET /api/filter/layer", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		st, _, _ := a.layerInfo()
		layerJSON(w, http.StatusOK, dashboard.LayerAnswer{State: st})
	}), web.Private)
	s.Handle("POST /api/filter/layer/lists", a.layerChange(addList), web.Mutating)
	s.Handle("POST /api/filter/layer/lists/remove", a.layerChange(removeList), web.Mutating)
	s.Handle("POST /api/filter/layer/lists/enable", a.layerChange(enableList), web.Mutating)
	s.Handle("POST /api/filter/layer/groups", a.layerChange(putGroup), web.Mutating)
	s.Handle("POST /api/filter/layer/groups/remove", a.layerChange(removeGroup), web.Mutating)
	s.Handle("POST /api/filter/layer/groups/device", a.layerChange(groupDevice), web.Mutating)
}

// errLayerRequest is a change request that names nothing valid (400).
var errLayerRequest = errors.New("bad request")

// edit changes l as r asks; it returns the entry's name ("list ads")
// and whether anything changed. file is the configuration file's.
type edit func(l *config.Layer, file config.Config, r *http.Request) (item string, changed bool, err error)

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errLayerRequest, fmt.Sprintf(format, args...))
}

// layerChange runs one change: read the layer file, change one entry,
// validate the entry as the file's entries are (config.Layer.Apply), write
// the file atomically and reload over the file's configuration. A change
// that fails validation, or a layer file that cannot be read (edited by
// hand), changes nothing and says why; a reload that fails puts the old
// layer file back and keeps the running configuration.
func (a *App) layerChange(ed edit) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		file := a.layer.Load().file
		path := config.LayerPath(file.Filter.StateDir)
		if path == "" {
			layerError(w, http.StatusConflict, "no filter.state_dir in the configuration file: the dashboard has nowhere to keep changes")
			return
		}
		old, readErr := safefile.ReadFile(path, config.MaxLayerBytes)
		if readErr != nil && !errors.Is(readErr, os.ErrNotExist) {
			layerError(w, http.StatusConflict, readErr.Error())
			return
		}
		l, err := config.ReadLayerFile(path)
		if err != nil {
			layerError(w, http.StatusConflict, err.Error()+"; nothing changed")
			return
		}
		_, was := l.Apply(file)
		item, changed, err := ed(&l, file, r)
		if err != nil {
			layerError(w, http.StatusBadRequest, err.Error())
			return
		}
		if !changed {
			layerJSON(w, http.StatusOK, dashboard.LayerAnswer{State: a.layer.Load().st, Item: item})
			return
		}
		// Refused: a change its own entry fails, and one that leaves out
		// another entry that applied (a list removed that a group uses,
		// which would take the whole group out with it).
		_, skips := l.Apply(file)
		if i := slices.IndexFunc(skips, func(s config.LayerSkip) bool {
			return s.Item == item || !slices.ContainsFunc(was, func(w config.LayerSkip) bool { return w.Item == s.Item })
		}); i >= 0 {
			layerError(w, http.StatusBadRequest, skips[i].String()+"; nothing changed")
			return
		}
		b, _ := json.MarshalIndent(l, "", "  ")
		if len(b)+1 > config.MaxLayerBytes {
			// No start or reload reads a larger file: written, it would
			// take every change made here out at once.
			layerError(w, http.StatusBadRequest, fmt.Sprintf("the layer file would be %d bytes, at most %d; nothing changed", len(b)+1, config.MaxLayerBytes))
			return
		}
		if err := safefile.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			layerError(w, http.StatusInternalServerError, "not saved, nothing changed: "+err.Error())
			return
		}
		err = a.reloadLocked(file)
		a.recordReload(err)
		if err != nil {
			restore := func() error { return os.Remove(path) }
			if readErr == nil {
				restore = func() error { return safefile.WriteFile(path, old, 0o600) }
			}
			if rerr := restore(); rerr != nil {
				a.log.Error("dashboard change: the layer file could not be put back", zap.Error(rerr))
			}
			layerError(w, http.StatusInternalServerError, "the running configuration is kept: "+err.Error())
			return
		}
		a.log.Info("dashboard change applied", zap.String("item", item), zap.String("file", path))
		layerJSON(w, http.StatusOK, dashboard.LayerAnswer{State: a.layer.Load().st, Item: item, Changed: true})
	})
}

// addList adds a downloaded list (name, url, kind), or replaces the
// layer's list of that name.
func addList(l *config.Layer, file config.Config, r *http.Request) (string, bool, error) {
	q := r.URL.Query()
	x := config.LayerList{Name: strings.TrimSpace(q.Get("name")), URL: strings.TrimSpace(q.Get("url")), Kind: q.Get("kind")}
	if x.Kind == config.ListBlock {
		x.Kind = ""
	}
	item := "list " + x.Name
	if x.Name == "" || x.URL == "" {
		return item, false, badRequest("a list needs a name and a url")
	}
	if i := slices.IndexFunc(l.Lists, func(y config.LayerList) bool { return y.Name == x.Name }); i >= 0 {
		if l.Lists[i] == x {
			return item, false, nil
		}
		l.Lists[i] = x
		return item, true, nil
	}
	if len(l.Lists) >= config.MaxFilterLists {
		return item, false, badRequest("already %d lists added from the dashboard, at most %d", len(l.Lists), config.MaxFilterLists)
	}
	l.Lists = append(l.Lists, x)
	return item, true, nil
}

// removeList drops a list added from the dashboard, or switches a file's
// list switched off on again: either way, the layer no longer says
// anything about the list.
func removeList(l *config.Layer, _ config.Config, r *http.Request) (string, bool, error) {
	name := r.URL.Query().Get("name")
	n := len(l.Lists) + len(l.ListsOff)
	l.Lists = slices.DeleteFunc(l.Lists, func(y config.LayerList) bool { return y.Name == name })
	l.ListsOff = slices.DeleteFunc(l.ListsOff, func(y string) bool { return y == name })
	return "list " + name, len(l.Lists)+len(l.ListsOff) != n, nil
}

// enableList switches a list on (on=true) or off (on=false): a list of the
// file through lists_off, a list of the layer through its disabled flag.
func enableList(l *config.Layer, file config.Config, r *http.Request) (string, bool, error) {
	q := r.URL.Query()
	name, on := q.Get("name"), q.Get("on")
	item := "list " + name
	if on != "true" && on != "false" {
		return item, false, badRequest("on=true or on=false")
	}
	want := on == "true"
	if i := slices.IndexFunc(l.Lists, func(y config.LayerList) bool { return y.Name == name }); i >= 0 {
		if l.Lists[i].Disabled == !want {
			return item, false, nil
		}
		l.Lists[i].Disabled = !want
		return item, true, nil
	}
	if !slices.ContainsFunc(file.Filter.Lists, func(y config.FilterList) bool { return y.Name == name }) {
		return item, false, badRequest("%.80q: no list of that name", name)
	}
	isOff := slices.Contains(l.ListsOff, name)
	switch {
	case want && isOff:
		l.ListsOff = slices.DeleteFunc(l.ListsOff, func(y string) bool { return y == name })
	case !want && !isOff:
		if len(l.ListsOff) >= config.MaxLayerOff {
			return item, false, badRequest("at most %d lists switched off", config.MaxLayerOff)
		}
		l.ListsOff = append(l.ListsOff, name)
	default:
		return item, false, nil
	}
	return item, true, nil
}

// putGroup creates a group, or replaces the layer's group of that name
// (last write wins): from a JSON body (a config.LayerGroup, every key of
// the layer file), or from the dashboard's form — name, devices, lists,
// services and safe_search comma-separated, youtube_mode, and one
// schedule window as days (comma-separated), from and to.
func putGroup(l *config.Layer, file config.Config, r *http.Request) (string, bool, error) {
	var g config.LayerGroup
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" {
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			return "group", false, badRequest("not a group: %v", err)
		}
	} else {
		q := r.URL.Query()
		g = config.LayerGroup{Name: strings.TrimSpace(q.Get("name")), Devices: splitList(q.Get("devices")),
			Lists: splitList(q.Get("lists")), Services: splitList(q.Get("services")),
			SafeSearch: splitList(q.Get("safe_search")), YouTubeMode: q.Get("youtube_mode")}
		if from, to := q.Get("from"), q.Get("to"); from != "" || to != "" {
			g.Schedule = []config.Window{{Days: splitList(q.Get("days")), From: from, To: to}}
		}
	}
	item := "group " + g.Name
	if g.Name == "" {
		return item, false, badRequest("a group needs a name")
	}
	if slices.ContainsFunc(file.Filter.Groups, func(y config.FilterGroup) bool { return y.Name == g.Name }) {
		return item, false, badRequest("the configuration file has a group named %q: change it there (its switches on the Groups page), or give this one another name", g.Name)
	}
	if i := slices.IndexFunc(l.Groups, func(y config.LayerGroup) bool { return y.Name == g.Name }); i >= 0 {
		l.Groups[i] = g
		return item, true, nil
	}
	if len(l.Groups) >= config.MaxLayerGroups {
		return item, false, badRequest("already %d groups made from the dashboard, at most %d", len(l.Groups), config.MaxLayerGroups)
	}
	l.Groups = append(l.Groups, g)
	return item, true, nil
}

// removeGroup drops a group made from the dashboard.
func removeGroup(l *config.Layer, _ config.Config, r *http.Request) (string, bool, error) {
	name := r.URL.Query().Get("name")
	n := len(l.Groups)
	l.Groups = slices.DeleteFunc(l.Groups, func(y config.LayerGroup) bool { return y.Name == name })
	return "group " + name, len(l.Groups) != n, nil
}

// groupDevice puts a device in a group made from the dashboard (in=true)
// or takes it out (in=false): the devices page's "put in group". The
// device is as a group's devices are (an address, a prefix, a MAC
// address or a [[clients]] name); a group of the file is refused.
func groupDevice(l *config.Layer, file config.Config, r *http.Request) (string, bool, error) {
	q := r.URL.Query()
	name, dev, in := q.Get("name"), strings.TrimSpace(q.Get("device")), q.Get("in")
	item := "group " + name
	if dev == "" || (in != "true" && in != "false") {
		return item, false, badRequest("device=… and in=true or in=false")
	}
	i := slices.IndexFunc(l.Groups, func(y config.LayerGroup) bool { return y.Name == name })
	switch {
	case i < 0 && slices.ContainsFunc(file.Filter.Groups, func(y config.FilterGroup) bool { return y.Name == name }):
		return item, false, badRequest("group %q is the configuration file's: put the device in its clients there", name)
	case i < 0:
		return item, false, badRequest("%.80q: no group of that name was made from the dashboard", name)
	}
	g := &l.Groups[i]
	has := slices.Contains(g.Devices, dev)
	switch {
	case in == "true" && !has:
		g.Devices = append(slices.Clone(g.Devices), dev)
	case in == "false" && has:
		g.Devices = slices.DeleteFunc(slices.Clone(g.Devices), func(d string) bool { return d == dev })
	default:
		return item, false, nil
	}
	return item, true, nil
}

// splitList splits a form field on commas and spaces; empty items go.
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}
