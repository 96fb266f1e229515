package filter

import (
	"net/netip"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/config"
)

// inlineBit is the list bit of filter.block and filter.allow: they apply to
// every client in every group.
const inlineBit = MaxLists - 1

// InlineList is the list name EDE 15, the metrics and the check endpoint
// give the inline rules.
const InlineList = "inline"

// Policy is who gets which lists when: the groups of one configuration,
// resolved to list bits. It is immutable; a reload builds a new one.
type Policy struct {
	groups   []group
	fallback int    // index of the "default" group, or -1
	newGroup int    // index of devices.new_devices' group, or -1 (newdevices.go)
	all      uint64 // every configured list and the inline rules
	loc      *time.Location
	clients  map[string]bool // the [[clients]] names, the names a pause may name (Knows)
	pooled   bool            // a group names upstreams of its own (pools.go)
}

type group struct {
	name     string
	mask     uint64
	prefixes []netip.Prefix
	names    map[string]bool // [[clients]] names, matched against the event's client name too
	windows  []window        // none: always
	pooled   bool            // the group has upstreams of its own (pools.go)
	switches groupSwitches   // services and safe search (services.go)
}

type window struct {
	days     uint8 // bit d: time.Weekday d
	from, to int   // minutes after local midnight; to <= from runs past midnight
}

// NewPolicy resolves cfg's groups to list bits (bits maps list names to
// their bit, Engine.Bits) in loc (nil: time.Local, the host's zone).
func NewPolicy(cfg config.Filter, clients []config.Client, bits map[string]int, loc *time.Location) *Policy {
	if loc == nil {
		loc = time.Local
	}
	p := &Policy{fallback: -1, newGroup: -1, loc: loc, all: 1 << inlineBit}
	for _, l := range cfg.Lists {
		if b, ok := bits[l.Name]; ok {
			p.all |= 1 << b
		}
	}
	byName := map[string][]netip.Addr{}
	p.clients = map[string]bool{}
	for _, c := range clients {
		p.clients[c.Name] = true
		if a, err := netip.ParseAddr(c.IP); err == nil {
			byName[c.Name] = append(byName[c.Name], a.Unmap())
		}
	}
	for i, g := range cfg.Groups {
		gr := group{name: g.Name, names: map[string]bool{}, pooled: len(g.Upstreams) > 0, switches: compileSwitches(g)}
		p.pooled = p.pooled || gr.pooled
		for _, l := range g.Lists {
			if b, ok := bits[l]; ok {
				gr.mask |= 1 << b
			}
		}
		for _, c := range g.Clients {
			if a, err := netip.ParseAddr(c); err == nil {
				a = a.Unmap()
				gr.prefixes = append(gr.prefixes, netip.PrefixFrom(a, a.BitLen()))
			} else if pf, err := netip.ParsePrefix(c); err == nil {
				gr.prefixes = append(gr.prefixes, pf.Masked())
			} else {
				gr.names[c] = true
				for _, a := range byName[c] {
					gr.prefixes = append(gr.prefixes, netip.PrefixFrom(a, a.BitLen()))
				}
			}
		}
		for _, w := range g.Schedule {
			gr.windows = append(gr.windows, parseWindow(w))
		}
		if g.Name == config.DefaultGroup {
			p.fallback = i
		}
		p.groups = append(p.groups, gr)
	}
	return p
}

func parseWindow(w config.Window) window {
	var out window
	if len(w.Days) == 0 {
		out.days = 0x7f
	}
	for _, d := range w.Days {
		for i, name := range config.Days {
			if strings.EqualFold(d, name) {
				out.days |= 1 << i
			}
		}
	}
	out.from, _ = config.ParseClock(w.From)
	out.to, _ = config.ParseClock(w.To)
	return out
}

// active reports whether t (already in local time) is inside w. Reading
// the wall clock of t in the configured zone is what makes it DST-correct:
// on a switch day the window starts and ends at the same local times, and
// the day is one hour shorter or longer.
func (w window) active(t time.Time) bool {
	m := t.Hour()*60 + t.Minute()
	today := w.days&(1<<t.Weekday()) != 0
	if w.from < w.to {
		return today && w.from <= m && m < w.to
	}
	yesterday := w.days&(1<<((t.Weekday()+6)%7)) != 0
	return today && m >= w.from || yesterday && m < w.to
}

func (g *group) activeAt(t time.Time) bool {
	if len(g.windows) == 0 {
		return true
	}
	for _, w := range g.windows {
		if w.active(t) {
			return true
		}
	}
	return false
}

func (g *group) has(client netip.Addr, name string) bool {
	for _, p := range g.prefixes {
		if p.Contains(client) {
			return true
		}
	}
	return name != "" && g.names[name]
}

// Lists returns the list bits that apply to a client now and the name of
// the group it is filtered by now, "" when there are no groups
// (docs/filter.md "Groups, schedules, pause"). The groups that apply are
// the client's own groups whose schedule is on now, and `default` (when
// its own schedule, if any, is on): a group's lists add to what every
// client gets, they never take the default group's away. A client none of
// whose groups is on now (outside every window, or in no group) is
// filtered as a client in no group: by `default`, or by every list when
// there is no `default` group. The inline rules always apply. The group
// named is the first of the client's groups that applies now, else
// `default`; GroupOf names the group of one list.
func (p *Policy) Lists(client netip.Addr, name string, now time.Time) (uint64, string) {
	return p.resolve(client, name, false, now, -1)
}

// GroupOf is the group whose list bit decided for a client now: the first
// of the groups that apply (Lists) that has the list, its own groups before
// `default`; "" for the inline rules or when no group has it (no groups, or
// a client filtered by every list).
func (p *Policy) GroupOf(client netip.Addr, name string, now time.Time, bit int) string {
	if bit == inlineBit {
		return ""
	}
	_, g := p.resolve(client, name, false, now, bit)
	return g
}

// resolve is Lists; with bit ≥ 0 the group named is the first that applies
// and has that list ("" if none has). newDev puts the client in the
// new_devices group too (newdevices.go).
func (p *Policy) resolve(client netip.Addr, name string, newDev bool, now time.Time, bit int) (uint64, string) {
	if len(p.groups) == 0 {
		return p.all, ""
	}
	client = client.Unmap()
	local := now.In(p.loc)
	mask, first := uint64(1<<inlineBit), ""
	own := false // one of the client's own groups is on now
	for i := range p.groups {
		g := &p.groups[i]
		if i == p.fallback || !(g.has(client, name) || newDev && i == p.newGroup) || !g.activeAt(local) {
			continue
		}
		own = true
		mask |= g.mask
		if first == "" && (bit < 0 || g.mask&(1<<bit) != 0) {
			first = g.name
		}
	}
	if p.fallback < 0 {
		if own {
			return mask, first
		}
		return p.all, ""
	}
	g := &p.groups[p.fallback]
	if g.activeAt(local) {
		mask |= g.mask
		if first == "" && (bit < 0 || g.mask&(1<<bit) != 0) {
			first = g.name
		}
	}
	if first == "" && bit < 0 {
		first = g.name
	}
	return mask, first
}

// Member reports whether a client belongs to group: a group of its own
// that lists its address or name, or `default`, whose lists apply to every
// client (Lists). Schedules do not matter: a paused group's clients are
// unfiltered whether or not its window is on.
func (p *Policy) Member(group string, client netip.Addr, name string) bool {
	client = client.Unmap()
	for i := range p.groups {
		g := &p.groups[i]
		if g.name != group {
			continue
		}
		return i == p.fallback || g.has(client, name)
	}
	return false
}

// Groups are the configured groups' names, in the file's order.
func (p *Policy) Groups() []string {
	out := make([]string, len(p.groups))
	for i := range p.groups {
		out[i] = p.groups[i].name
	}
	return out
}

// Knows reports whether name is a client name of this configuration: a
// [[clients]] name or a name a group lists.
func (p *Policy) Knows(name string) bool {
	if p.clients[name] {
		return true
	}
	for i := range p.groups {
		if p.groups[i].names[name] {
			return true
		}
	}
	return false
}

// addrOf is the first address a [[clients]] name has, for explaining a
// decision by name; the zero Addr when it has none.
func (p *Policy) addrOf(name string) netip.Addr {
	for i := range p.groups {
		g := &p.groups[i]
		if g.names[name] {
			for _, pf := range g.prefixes {
				if pf.IsSingleIP() {
					return pf.Addr()
				}
			}
		}
	}
	return netip.Addr{}
}
