package filter

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/catalog"
)

// ServicesAnswer is what GET /api/filter/services answers: the catalogue
// built into the binary, with how many queries each service blocked.
type ServicesAnswer struct {
	Version  string          `json:"version"`
	Services []ServiceStatus `json:"services"`
	Engines  []string        `json:"safe_search_engines"`
}

// ServiceStatus is one catalogue service.
type ServiceStatus struct {
	ID      string   `json:"id"`      // lower case; what [[filter.groups]] services names
	Name    string   `json:"name"`    // "TikTok"
	Source  string   `json:"source"`  // where its domains come from (services.txt)
	Domains []string `json:"domains"` // each blocks itself and every name below it
	Blocked uint64   `json:"blocked"` // queries blocked since start
}

func (e *Engine) handleServices(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, e.Services())
}

// Services is the catalogue with each service's blocked count.
func (e *Engine) Services() ServicesAnswer {
	cat := index().cat
	a := ServicesAnswer{Version: cat.Version, Engines: catalog.Engines}
	for i, s := range cat.Services {
		a.Services = append(a.Services, ServiceStatus{ID: s.ID, Name: s.Name, Source: s.Source, Domains: s.Domains, Blocked: e.servicesBlocked[i].Load()})
	}
	return a
}

// servicesBlockedByID is the queries each service blocked, by id, for
// those that blocked any: the metrics' service label is bounded by the
// catalogue, and a series appears with a service's first block.
func (e *Engine) servicesBlockedByID() map[string]uint64 {
	out := map[string]uint64{}
	for i, s := range index().cat.Services {
		if n := e.servicesBlocked[i].Load(); n > 0 {
			out[s.ID] = n
		}
	}
	return out
}

// SafeSearched is how many queries each engine's safe search answered, by
// engine id.
func (e *Engine) SafeSearched() map[string]uint64 {
	out := map[string]uint64{}
	for i, eng := range catalog.Engines {
		out[eng] = e.safeSearched[i].Load()
	}
	return out
}

// GroupSwitches is one group's switches for GET /api/filter/groups: what
// applies (the configuration with the dashboard's overrides), what the
// configuration says, and the overrides.
type GroupSwitches struct {
	Name        string   `json:"name"`
	Services    []string `json:"services"`    // in force: catalogue ids
	SafeSearch  []string `json:"safe_search"` // in force: engines
	YouTubeMode string   `json:"youtube_mode"`
	Configured  struct {
		Services   []string `json:"services"`
		SafeSearch []string `json:"safe_search"`
	} `json:"configured"`
	Overrides Override `json:"overrides"`
	Scheduled bool     `json:"scheduled"` // the group has a schedule: its switches apply inside it
}

// Groups lists the serving configuration's groups with their switches.
func (e *Engine) Groups(s *Stage) []GroupSwitches {
	ov := e.overrides.snapshot()
	compiled := e.overrides.load()
	out := []GroupSwitches{}
	for i := range s.policy.groups {
		g := &s.policy.groups[i]
		gs := GroupSwitches{Name: g.name, Overrides: ov[g.name], Scheduled: len(g.windows) > 0, YouTubeMode: catalog.YouTubeModerate}
		if g.switches.strict {
			gs.YouTubeMode = catalog.YouTubeStrict
		}
		gs.Services, gs.SafeSearch = switchNames(g.switches.effective(compiled[g.name]))
		gs.Configured.Services, gs.Configured.SafeSearch = switchNames(g.switches)
		out = append(out, gs)
	}
	return out
}

// switchNames names the services and engines of w, never nil.
func switchNames(w groupSwitches) ([]string, []string) {
	svcs, engines := []string{}, []string{}
	for i, svc := range index().cat.Services {
		if w.services.has(i) {
			svcs = append(svcs, svc.ID)
		}
	}
	for _, eng := range catalog.Engines {
		if w.safe&engineBit(eng) != 0 {
			engines = append(engines, eng)
		}
	}
	return svcs, engines
}

// SwitchAnswer is what POST /api/filter/groups/switch answers.
type SwitchAnswer struct {
	Group      string `json:"group"`
	Service    string `json:"service,omitempty"`
	SafeSearch string `json:"safe_search,omitempty"`
	State      string `json:"state"`   // on, off or config
	Changed    bool   `json:"changed"` // false: it already was so
	// SaveError: the change applies now but could not be written to
	// filter.state_dir, so a restart would lose it.
	SaveError string `json:"save_error,omitempty"`
}

// handleSwitch turns one service or one engine's safe search on or off
// for a group, or back to what the configuration says (state=config).
func (e *Engine) handleSwitch(w http.ResponseWriter, r *http.Request, s *Stage) {
	q := r.URL.Query()
	group, service, engine := strings.TrimSpace(q.Get("group")), strings.TrimSpace(q.Get("service")), strings.TrimSpace(q.Get("safe_search"))
	var state *bool
	switch st := q.Get("state"); st {
	case "on", "off":
		on := st == "on"
		state = &on
	case "config":
	default:
		httpError(w, http.StatusBadRequest, "state: want on, off or config")
		return
	}
	if (service == "") == (engine == "") {
		httpError(w, http.StatusBadRequest, "name one service= or one safe_search= engine")
		return
	}
	if !s.policy.hasGroup(group) {
		httpError(w, http.StatusNotFound, "group: "+strconv.Quote(group)+" is not a [[filter.groups]] name")
		return
	}
	kind, id := SwitchService, service
	if engine != "" {
		kind, id = SwitchSafeSearch, engine
		if !knownSwitch(kind, id) {
			httpError(w, http.StatusNotFound, "safe_search: "+strconv.Quote(engine)+": want one of "+strings.Join(catalog.Engines, ", "))
			return
		}
	} else if !knownSwitch(kind, id) {
		httpError(w, http.StatusNotFound, "service: "+strconv.Quote(service)+" is not in the catalogue (GET /api/filter/services)")
		return
	}
	changed, err := e.SetSwitch(group, kind, id, state)
	if errors.Is(err, errSwitch) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := SwitchAnswer{Group: group, Service: service, SafeSearch: engine, State: q.Get("state"), Changed: changed}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}

// The kinds of group switch.
const (
	SwitchService    = "service"
	SwitchSafeSearch = "safe_search"
)

// knownSwitch reports whether id is a catalogue service (kind
// SwitchService) or a safe-search engine (SwitchSafeSearch).
func knownSwitch(kind, id string) bool {
	switch kind {
	case SwitchService:
		_, ok := index().cat.Lookup(id)
		return ok
	case SwitchSafeSearch:
		return slices.Contains(catalog.Engines, id)
	}
	return false
}

// SetSwitch turns one of group's switches on (true), off (false) or back
// to the configuration (nil), as the dashboard's switch does; the Home
// Assistant switches come here too. It reports whether anything changed;
// a change applies even when it could not be saved (the error says so),
// and is told to the replication (replicate.go). The caller has checked
// that the group is configured and the id known (knownSwitch).
func (e *Engine) SetSwitch(group, kind, id string, state *bool) (bool, error) {
	changed, err := e.overrides.set(group, kind, id, state)
	if changed {
		e.log.Info("group switch changed", zap.String("group", group), zap.String(kind, id), zap.String("state", stateName(state)), zap.Error(err))
		e.stateChanged(switchKeyOf(group, kind, id), switchValue(state))
	}
	return changed, err
}

// stateName is a switch state as the API names it.
func stateName(state *bool) string {
	if v := switchValue(state); v != "" {
		return v
	}
	return "config"
}

// SwitchOn reports whether group's switch applies now by its configuration
// and the dashboard's override (a group's schedule aside); false for a
// group s does not have, or no stage (filtering off since a reload).
func (e *Engine) SwitchOn(s *Stage, group, kind, id string) bool {
	if s == nil {
		return false
	}
	for _, g := range e.Groups(s) {
		if g.Name == group {
			if kind == SwitchSafeSearch {
				return slices.Contains(g.SafeSearch, id)
			}
			return slices.Contains(g.Services, id)
		}
	}
	return false
}
