package filter

import (
	"errors"
	"maps"
	"strings"
	"time"
)

// Dashboard state as keys and values, for replication between two nxdns
// (internal/peers, docs/how-to/two-pis.md): every change made here is told
// to the OnChange hook as one key and its new value, and ApplyReplicated
// applies a peer's, without telling the hook again.
//
//	allow/NAME          "1" allowed, "" not
//	pause/all           RFC 3339 end of a pause for everyone, "" none
//	pause/client/KEY    the same for a client (an address or a [[clients]] name)
//	pause/group/NAME    the same for a group
//	switch/GROUP/service/ID        "on", "off", or "" the configuration's
//	switch/GROUP/safe_search/ENGINE the same for an engine's safe search
//	nta/NAME            RFC 3339 end of a dashboard NTA, "" removed
const (
	allowKey       = "allow/"
	pauseAllKey    = "pause/all"
	pauseClientKey = "pause/client/"
	pauseGroupKey  = "pause/group/"
	switchKey      = "switch/"
	ntaKey         = "nta/"
)

// switchKeyOf is the replication key of one group switch.
func switchKeyOf(group, kind, id string) string { return switchKey + group + "/" + kind + "/" + id }

// switchValue is a switch state as a replicated value.
func switchValue(state *bool) string {
	switch {
	case state == nil:
		return ""
	case *state:
		return "on"
	}
	return "off"
}

func pauseKey(client string) string {
	if client == "" {
		return pauseAllKey
	}
	return pauseClientKey + client
}

// OnChange sets the hook told of every dashboard-state change made here;
// nil removes it. It is called after the change applied, on the caller's
// goroutine, and must not call back into the Engine's changes.
func (e *Engine) OnChange(fn func(key, value string)) {
	if fn == nil {
		e.onChange.Store(nil)
		return
	}
	e.onChange.Store(&fn)
}

func (e *Engine) stateChanged(key, value string) {
	if fn := e.onChange.Load(); fn != nil {
		(*fn)(key, value)
	}
}

// ApplyReplicated applies a peer's change of key to value, as the
// dashboard action would but without telling OnChange. A key or value it
// does not understand is ignored and reported false: a newer peer's key,
// or garbage, changes nothing.
func (e *Engine) ApplyReplicated(key, value string) bool {
	switch {
	case strings.HasPrefix(key, allowKey):
		n, ok := normalise(key[len(allowKey):], Subtree)
		if !ok || n != key[len(allowKey):] {
			return false
		}
		var err error
		if value == "1" {
			_, err = e.allow.add(n)
		} else if value == "" {
			_, err = e.allow.remove(n)
		} else {
			return false
		}
		return err != ErrAllowFull // a save error leaves the change applied
	case key == pauseAllKey, strings.HasPrefix(key, pauseClientKey), strings.HasPrefix(key, pauseGroupKey):
		// Bounded as a pause made here is (maxPauseMinutes): a peer's
		// clock a year ahead, or an edited state file, must not leave
		// filtering off here for a year (docs/filter.md).
		until, ok := e.replicatedEnd(value, maxPauseMinutes*time.Minute)
		if !ok {
			return false
		}
		e.pauses.set(key, until)
		return true
	case strings.HasPrefix(key, switchKey):
		return e.applySwitch(key[len(switchKey):], value)
	case strings.HasPrefix(key, ntaKey):
		return e.applyNTA(key[len(ntaKey):], value)
	}
	return false
}

// replicatedEnd reads a replicated end time ("" none: zero), bounded to
// most from this node's clock; ok is false for a value that is no time.
func (e *Engine) replicatedEnd(value string, most time.Duration) (time.Time, bool) {
	if value == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, false
	}
	if limit := e.now().Add(most); t.After(limit) {
		t = limit
	}
	return t, true
}

// applySwitch applies a replicated switch: rest is GROUP/KIND/ID (a group
// name may hold a slash; a kind and an id do not). A service or an engine
// this binary's catalogue lacks is not applied.
func (e *Engine) applySwitch(rest, value string) bool {
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return false
	}
	id, rest := rest[i+1:], rest[:i]
	j := strings.LastIndexByte(rest, '/')
	if j < 0 {
		return false
	}
	group, kind := rest[:j], rest[j+1:]
	if group == "" || len(group) > maxOverrideGroupLen || !knownSwitch(kind, id) {
		return false
	}
	var state *bool
	switch value {
	case "on", "off":
		on := value == "on"
		state = &on
	case "":
	default:
		return false
	}
	_, err := e.overrides.set(group, kind, id, state)
	return !errors.Is(err, errSwitch) // a save error leaves the change applied
}

// applyNTA applies a replicated dashboard NTA, its end bounded as one set
// here is (MaxNTADuration): a peer's clock a year ahead must not stop
// validation here for a year (docs/dnssec.md).
func (e *Engine) applyNTA(name, value string) bool {
	n, ok := normalise(name, Subtree)
	if !ok || n != name {
		return false
	}
	end, ok := e.replicatedEnd(value, MaxNTADuration)
	if !ok {
		return false
	}
	err := e.nta.change(e.now(), func(m map[string]time.Time) error {
		if end.IsZero() {
			delete(m, n)
			return nil
		}
		if _, ok := m[n]; !ok && len(m) >= MaxNTAs {
			return ErrNTAFull
		}
		m[n] = end
		return nil
	})
	return !errors.Is(err, ErrNTAFull)
}

// keys are the replication keys of the pauses resume(client) ends: for ""
// every pause there is.
func (p *pauses) keys(client string) []string {
	if client != "" {
		return []string{pauseClientKey + client}
	}
	out := []string{pauseAllKey}
	if m := p.clients.Load(); m != nil {
		for k := range *m {
			out = append(out, pauseClientKey+k)
		}
	}
	if m := p.groups.Load(); m != nil {
		for k := range *m {
			out = append(out, pauseGroupKey+k)
		}
	}
	return out
}

// set applies one pause key: until zero ends it.
func (p *pauses) set(key string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if key == pauseAllKey {
		var n int64
		if !until.IsZero() {
			n = until.UnixNano()
		}
		p.all.Store(n)
		return
	}
	m, name := &p.clients, strings.TrimPrefix(key, pauseClientKey)
	if strings.HasPrefix(key, pauseGroupKey) {
		m, name = &p.groups, strings.TrimPrefix(key, pauseGroupKey)
	}
	next := map[string]time.Time{}
	if cur := m.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	if until.IsZero() {
		delete(next, name)
	} else {
		next[name] = until
	}
	m.Store(&next)
}
