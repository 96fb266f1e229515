package filter

import (
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// pauses is filtering paused for everyone or for single clients, each until
// a time: a pause ends by itself when its time passes, with no timer to
// cancel.
//
// Guarantee: the query path reads it without a lock (one atomic load each
// for the global pause and the per-client map, which is replaced whole on
// every change, never modified in place); changes are serialised by mu.
type pauses struct {
	all     atomic.Int64 // unix nanoseconds until which every client is paused; 0: none
	clients atomic.Pointer[map[string]time.Time]
	groups  atomic.Pointer[map[string]time.Time] // group name → until (pauseGroup)
	mu      sync.Mutex
}

// pause pauses filtering for client ("" for everyone: an IP address or a
// [[clients]] name) until until.
func (p *pauses) pause(client string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if client == "" {
		p.all.Store(until.UnixNano())
		return
	}
	next := map[string]time.Time{}
	if cur := p.clients.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	next[client] = until
	p.clients.Store(&next)
}

// resume ends the pauses: every one for client "", else that client's.
func (p *pauses) resume(client string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if client == "" {
		p.all.Store(0)
		p.clients.Store(nil)
		p.groups.Store(nil)
		return
	}
	cur := p.clients.Load()
	if cur == nil {
		return
	}
	next := maps.Clone(*cur)
	delete(next, client)
	p.clients.Store(&next)
}

// has reports whether client (a key as pause was given it) has a pause,
// running or run out.
func (p *pauses) has(client string) bool {
	m := p.clients.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[client]
	return ok
}

// paused reports whether filtering is paused for a client at now, and until
// when.
func (p *pauses) paused(client netip.Addr, name string, now time.Time) (time.Time, bool) {
	if until := p.all.Load(); until != 0 && now.UnixNano() < until {
		return time.Unix(0, until), true
	}
	m := p.clients.Load()
	if m == nil || len(*m) == 0 {
		return time.Time{}, false
	}
	if until, ok := (*m)[client.Unmap().String()]; ok && now.Before(until) {
		return until, true
	}
	if name != "" {
		if until, ok := (*m)[name]; ok && now.Before(until) {
			return until, true
		}
	}
	return time.Time{}, false
}

// PausedUntil reports whether filtering is paused for everyone now, and
// until when (the dashboard's header shows it).
func (e *Engine) PausedUntil() (time.Time, bool) {
	if until := e.pauses.all.Load(); until != 0 && e.now().UnixNano() < until {
		return time.Unix(0, until), true
	}
	return time.Time{}, false
}

// Group pauses (docs/filter.md "Groups, schedules, pause"): filtering off
// for every client of a [[filter.groups]] group until a time, each ending
// by itself. Read like the client map: one atomic load on the query path,
// nothing more when no group is paused.
func (p *pauses) pauseGroup(group string, until time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[string]time.Time{}
	if cur := p.groups.Load(); cur != nil {
		maps.Copy(next, *cur)
	}
	next[group] = until
	p.groups.Store(&next)
}

func (p *pauses) resumeGroup(group string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.groups.Load()
	if cur == nil {
		return
	}
	next := maps.Clone(*cur)
	delete(next, group)
	p.groups.Store(&next)
}

// groupUntil is when group's pause ends, if it runs at now.
func (p *pauses) groupUntil(group string, now time.Time) (time.Time, bool) {
	m := p.groups.Load()
	if m == nil {
		return time.Time{}, false
	}
	until, ok := (*m)[group]
	return until, ok && now.Before(until)
}
