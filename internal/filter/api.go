package filter

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// maxPauseMinutes bounds a pause to a week: a forgotten pause ends.
const maxPauseMinutes = 7 * 24 * 60

// Route is one HTTP endpoint of the filter; Mutating ones change state.
type Route struct {
	Pattern  string
	Handler  http.Handler
	Mutating bool
}

// Routes are the filter's API endpoints (docs/design.md#filtering); current returns the
// serving generation's stage. internal/app mounts them with web.Server.Handle
// as Private or Mutating.
func (e *Engine) Routes(current func() *Stage) []Route {
	return []Route{
		{Pattern: "POST /api/filter/pause", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.handlePause(w, r, current())
		}), Mutating: true},
		{Pattern: "POST /api/filter/resume", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.handleResume(w, r, current())
		}), Mutating: true},
		{Pattern: "GET /api/filter/check", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.handleCheck(w, r, current())
		})},
		{Pattern: "GET /api/filter/lists", Handler: http.HandlerFunc(e.handleLists)},
		{Pattern: "POST /api/filter/lists/refresh", Handler: http.HandlerFunc(e.handleRefresh), Mutating: true},
		{Pattern: "GET /api/filter/allow", Handler: http.HandlerFunc(e.handleAllowed)},
		{Pattern: "POST /api/filter/allow", Handler: http.HandlerFunc(e.handleAllow), Mutating: true},
		{Pattern: "DELETE /api/filter/allow", Handler: http.HandlerFunc(e.handleUnallow), Mutating: true},
		{Pattern: "POST /api/filter/allow/remove", Handler: http.HandlerFunc(e.handleUnallow), Mutating: true},
		{Pattern: "GET /api/dnssec/nta", Handler: http.HandlerFunc(e.handleNTAs)},
		{Pattern: "POST /api/dnssec/nta", Handler: http.HandlerFunc(e.handleAddNTA), Mutating: true},
		{Pattern: "DELETE /api/dnssec/nta", Handler: http.HandlerFunc(e.handleRemoveNTA), Mutating: true},
		{Pattern: "GET /api/filter/block", Handler: http.HandlerFunc(e.handleBlocked)},
		{Pattern: "POST /api/filter/block", Handler: http.HandlerFunc(e.handleBlock), Mutating: true},
		{Pattern: "POST /api/filter/block/remove", Handler: http.HandlerFunc(e.handleUnblock), Mutating: true},
		{Pattern: "GET /api/filter/services", Handler: http.HandlerFunc(e.handleServices)},
		{Pattern: "GET /api/filter/groups", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, e.Groups(current()))
		})},
		{Pattern: "POST /api/filter/groups/switch", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.handleSwitch(w, r, current())
		}), Mutating: true},
	}
}

// clientKey is a client as pauses key it: an address in its canonical form,
// or a [[clients]] name as given.
func clientKey(s string) string {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().String()
	}
	return s
}

// unknownClient answers 404 when client is a name the configuration does
// not know (docs/filter.md): a pause for a mistyped name would report
// success and pause nobody. An address, "" (everyone) and a name with a
// pause still running (its [[clients]] entry was removed since) pass.
func (e *Engine) unknownClient(w http.ResponseWriter, client string, s *Stage) bool {
	if client == "" || s.policy.Knows(client) || e.pauses.has(client) {
		return false
	}
	if _, err := netip.ParseAddr(client); err == nil {
		return false
	}
	httpError(w, http.StatusNotFound, "client: "+strconv.Quote(client)+" is neither an IP address nor a [[clients]] name")
	return true
}

func (e *Engine) handlePause(w http.ResponseWriter, r *http.Request, s *Stage) {
	q := r.URL.Query()
	minutes, err := strconv.Atoi(q.Get("minutes"))
	if err != nil || minutes < 1 || minutes > maxPauseMinutes {
		httpError(w, http.StatusBadRequest, "minutes: want a whole number from 1 to "+strconv.Itoa(maxPauseMinutes))
		return
	}
	if group, ok := e.groupParam(w, r, s); ok {
		if group != "" {
			until := e.PauseGroup(group, time.Duration(minutes)*time.Minute)
			writeJSON(w, PauseAnswer{Paused: true, Group: group, Until: until})
		}
		return
	}
	client := strings.TrimSpace(q.Get("client"))
	if e.unknownClient(w, client, s) {
		return
	}
	until := e.Pause(client, time.Duration(minutes)*time.Minute)
	writeJSON(w, PauseAnswer{Paused: true, Client: client, Until: until})
}

// PauseAnswer is what POST /api/filter/pause and /resume answer.
type PauseAnswer struct {
	Paused bool      `json:"paused"`
	Client string    `json:"client"`          // "": everyone
	Group  string    `json:"group,omitempty"` // a group's pause (group=)
	Until  time.Time `json:"until,omitzero"`
}

// groupParam handles group= of pause and resume: ok when the request
// names a group (group is "" when it was refused and answered), for a
// group the configuration has.
func (e *Engine) groupParam(w http.ResponseWriter, r *http.Request, s *Stage) (group string, ok bool) {
	q := r.URL.Query()
	if !q.Has("group") {
		return "", false
	}
	group = strings.TrimSpace(q.Get("group"))
	switch {
	case q.Has("client"):
		httpError(w, http.StatusBadRequest, "group and client: give one")
		return "", true
	case s == nil || !slices.Contains(s.policy.Groups(), group):
		httpError(w, http.StatusNotFound, "group: "+strconv.Quote(group)+" is not a [[filter.groups]] name")
		return "", true
	}
	return group, true
}

func (e *Engine) handleResume(w http.ResponseWriter, r *http.Request, s *Stage) {
	if group, ok := e.groupParam(w, r, s); ok {
		if group != "" {
			e.ResumeGroup(group)
			writeJSON(w, PauseAnswer{Group: group})
		}
		return
	}
	client := strings.TrimSpace(r.URL.Query().Get("client"))
	if e.unknownClient(w, client, s) {
		return
	}
	e.Resume(client)
	writeJSON(w, PauseAnswer{Client: client})
}

func (e *Engine) handleCheck(w http.ResponseWriter, r *http.Request, s *Stage) {
	q := r.URL.Query()
	name := strings.TrimSpace(q.Get("name"))
	if name == "" {
		httpError(w, http.StatusBadRequest, "name: required")
		return
	}
	norm, ok := normalise(name, Subtree)
	if !ok {
		httpError(w, http.StatusBadRequest, "name: not a domain name")
		return
	}
	var ip netip.Addr
	var clientName string
	if c := strings.TrimSpace(q.Get("client")); c != "" {
		if a, err := netip.ParseAddr(c); err == nil {
			ip = a.Unmap()
		} else {
			clientName = c
			ip = s.policy.addrOf(c)
		}
	}
	d := s.Check(norm, ip, clientName, e.now())
	if clientName != "" {
		d.Client = clientName
	}
	writeJSON(w, d)
}

func (e *Engine) handleLists(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, e.Snapshot().Lists)
}

// AllowAnswer is what POST and DELETE /api/filter/allow answer.
type AllowAnswer struct {
	Name    string `json:"name"`
	Allowed bool   `json:"allowed"` // after the request
	Changed bool   `json:"changed"` // false: it already was (or was not) allowed
	// SaveError: the change applies now but could not be written to
	// filter.state_dir, so a restart would lose it.
	SaveError string `json:"save_error,omitempty"`
}

// AllowedAnswer is what GET /api/filter/allow answers.
type AllowedAnswer struct {
	Names []string `json:"names"`
	Max   int      `json:"max"`
}

func (e *Engine) handleAllowed(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, AllowedAnswer{Names: e.Allowed(), Max: MaxAllowed})
}

func (e *Engine) handleAllow(w http.ResponseWriter, r *http.Request) {
	name, added, err := e.Allow(r.URL.Query().Get("name"))
	switch {
	case errors.Is(err, errNotAName), errors.Is(err, ErrAllowFull):
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := AllowAnswer{Name: name, Allowed: true, Changed: added}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}

func (e *Engine) handleUnallow(w http.ResponseWriter, r *http.Request) {
	name, removed, err := e.Unallow(r.URL.Query().Get("name"))
	if errors.Is(err, errNotAName) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := AllowAnswer{Name: name, Changed: removed}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}

// BlockAnswer is what POST /api/filter/block and /block/remove answer.
type BlockAnswer struct {
	Name      string `json:"name"`
	Blocked   bool   `json:"blocked"` // after the request
	Changed   bool   `json:"changed"`
	SaveError string `json:"save_error,omitempty"`
}

func (e *Engine) handleBlocked(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, AllowedAnswer{Names: e.BlockedNames(), Max: MaxAllowed})
}

func (e *Engine) handleBlock(w http.ResponseWriter, r *http.Request) {
	name, added, err := e.Block(r.URL.Query().Get("name"))
	if errors.Is(err, errNotAName) || errors.Is(err, ErrBlockFull) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := BlockAnswer{Name: name, Blocked: true, Changed: added}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}

func (e *Engine) handleUnblock(w http.ResponseWriter, r *http.Request) {
	name, removed, err := e.Unblock(r.URL.Query().Get("name"))
	if errors.Is(err, errNotAName) {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := BlockAnswer{Name: name, Changed: removed}
	if err != nil {
		a.SaveError = err.Error()
	}
	writeJSON(w, a)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// Pause pauses filtering for client (an IP address or a [[clients]] name;
// "" for everyone) for d; it ends by itself.
func (e *Engine) Pause(client string, d time.Duration) time.Time {
	until := e.now().Add(d)
	e.pauses.pause(clientKey(client), until)
	e.log.Info("filtering paused", zap.String("client", client), zap.Time("until", until))
	e.stateChanged(pauseKey(clientKey(client)), until.UTC().Format(time.RFC3339Nano))
	return until
}

// PauseGroup pauses filtering for every client of group (Policy.Member)
// for d; it ends by itself. The dashboard's pause with group= and the Home
// Assistant switch both come here.
func (e *Engine) PauseGroup(group string, d time.Duration) time.Time {
	until := e.now().Add(d)
	e.pauses.pauseGroup(group, until)
	e.log.Info("filtering paused for a group", zap.String("group", group), zap.Time("until", until))
	e.stateChanged(pauseGroupKey+group, until.UTC().Format(time.RFC3339Nano))
	return until
}

// ResumeGroup ends group's pause.
func (e *Engine) ResumeGroup(group string) {
	e.pauses.resumeGroup(group)
	e.log.Info("filtering resumed for a group", zap.String("group", group))
	e.stateChanged(pauseGroupKey+group, "")
}

// GroupPaused reports whether group's pause runs now, and until when.
func (e *Engine) GroupPaused(group string) (time.Time, bool) {
	return e.pauses.groupUntil(group, e.now())
}

// Resume ends client's pause, or every pause for "".
func (e *Engine) Resume(client string) {
	ended := e.pauses.keys(clientKey(client))
	e.pauses.resume(clientKey(client))
	e.log.Info("filtering resumed", zap.String("client", client))
	for _, k := range ended {
		e.stateChanged(k, "")
	}
}
