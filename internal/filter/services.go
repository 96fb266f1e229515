package filter

import (
	"math/bits"
	"net/netip"
	"sync"
	"time"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
)

// The household switches of a group (docs/filter.md "Blocked services",
// "Safe search"): the catalogue's services it blocks and the engines whose
// safe search it forces, applied while the group applies, as its lists are.

// svcSet is a set of catalogue services by index (catalog.MaxServices).
type svcSet [catalog.MaxServices / 64]uint64

func (s *svcSet) add(i int)          { s[i/64] |= 1 << (i % 64) }
func (s svcSet) has(i int) bool      { return s[i/64]&(1<<(i%64)) != 0 }
func (s svcSet) empty() bool         { return s == svcSet{} }
func (s svcSet) and(o svcSet) svcSet { return svcSet{s[0] & o[0], s[1] & o[1]} }
func (s *svcSet) or(o svcSet)        { s[0] |= o[0]; s[1] |= o[1] }
func (s *svcSet) andNot(o svcSet)    { s[0] &^= o[0]; s[1] &^= o[1] }

// first is the lowest index in s; s is not empty.
func (s svcSet) first() int {
	if s[0] != 0 {
		return bits.TrailingZeros64(s[0])
	}
	return 64 + bits.TrailingZeros64(s[1])
}

// Safe-search engines as bits, in catalog.Engines' order
// (TestEngineBits_followTheCatalogue); 0 for an unknown engine. A switch,
// not a search of the list: the query path asks it.
func engineBit(engine string) uint8 {
	switch engine {
	case catalog.Google:
		return 1 << 0
	case catalog.Bing:
		return 1 << 1
	case catalog.DuckDuckGo:
		return 1 << 2
	case catalog.YouTube:
		return youtubeBit
	}
	return 0
}

const youtubeBit uint8 = 1 << 3

// switches are what a client gets from the groups that apply to it now.
type switches struct {
	services svcSet
	safe     uint8 // engineBit of each engine forced
	strict   bool  // YouTube strict: some applying group with youtube wants it
}

// groupSwitches are one group's switches from the configuration.
type groupSwitches struct {
	services svcSet
	safe     uint8
	strict   bool // youtube_mode is strict (the default)
}

// serviceIndex maps each catalogue domain to the services that have it,
// and each safe-search name to its rewrite. A bit filter over the names'
// hashes (suffixes) comes first: a name none of whose suffixes can be in
// either map is let through without a map lookup, which is most names.
type serviceIndex struct {
	cat      *catalog.Catalogue
	byDomain map[string]svcSet
	rewrites map[string]catalog.Rewrite
	maybe    suffixFilter
}

// index is the embedded catalogue's, built on first use.
var index = sync.OnceValue(func() *serviceIndex { return buildIndex(catalog.Services()) })

func buildIndex(cat *catalog.Catalogue) *serviceIndex {
	x := &serviceIndex{cat: cat, byDomain: map[string]svcSet{}, rewrites: catalog.Rewrites()}
	for i, s := range cat.Services {
		for _, d := range s.Domains {
			set := x.byDomain[d]
			set.add(i)
			x.byDomain[d] = set
			x.maybe.add(nameHash(d))
		}
	}
	for name := range x.rewrites {
		x.maybe.add(nameHash(name))
	}
	return x
}

// match is the service of active whose domain is the longest of name and
// its parents that has one (-1: none), and that domain; name is lower case
// without its trailing dot. One pass over name from its end, hashing as it
// goes (suffixHashes), a map lookup only for a suffix the filter may have;
// it allocates nothing.
func (x *serviceIndex) match(name string, active svcSet) (int, string) {
	found, domain := -1, ""
	suffixHashes(name, func(suffix string, h uint64) {
		if x.maybe.has(h) {
			if s, ok := x.byDomain[suffix]; ok {
				if m := s.and(active); !m.empty() {
					found, domain = m.first(), suffix
				}
			}
		}
	})
	return found, domain
}

// mayHave is name's hash (nameHash) and whether the filter says name or a
// parent of it may be a catalogue domain or a safe-search name: when not,
// no switch applies to name.
func (x *serviceIndex) mayHave(name string) (uint64, bool) {
	// suffixHashes without the call per suffix: every query with a switch
	// on comes here.
	h, maybe := uint64(fnvOffset), false
	for i := len(name) - 1; i >= 0; i-- {
		c := name[i]
		if c == '.' && !maybe {
			maybe = x.maybe.has(h)
		}
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h, maybe || x.maybe.has(h)
}

// rewrite is name's safe-search rewrite, if it has one; h is nameHash(name),
// or 0 when the caller has not computed it.
func (x *serviceIndex) rewrite(name string, h uint64) (catalog.Rewrite, bool) {
	if h == 0 {
		h = nameHash(name)
	}
	if !x.maybe.has(h) {
		return catalog.Rewrite{}, false
	}
	rw, ok := x.rewrites[name]
	return rw, ok
}

// The suffix hash is FNV-1a over a name's bytes read from its end, so the
// hash of a name extends its parent's: one pass gives every suffix's.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// suffixHashes calls f with each suffix of name that is a name (itself and
// each parent), shortest first, and its hash; it returns name's hash.
func suffixHashes(name string, f func(suffix string, h uint64)) uint64 {
	h := uint64(fnvOffset)
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			f(name[i+1:], h)
		}
		h = (h ^ uint64(name[i])) * fnvPrime
	}
	if name != "" {
		f(name, h)
	}
	return h
}

// nameHash is a whole name's suffix hash.
func nameHash(name string) uint64 { return suffixHashes(name, func(string, uint64) {}) }

// suffixFilter is a one-hash bit filter of 16 Ki bits (2 KiB): with the
// catalogue's and the safe-search names' some 800 entries, about one name
// in twenty of those not there is looked up anyway, and a name that is
// there always is.
type suffixFilter [1 << 14 / 64]uint64

// The filter takes a hash's top bits: FNV's low bits mix poorly.
func (f *suffixFilter) add(h uint64) { h >>= 64 - 14; f[h/64] |= 1 << (h % 64) }
func (f *suffixFilter) has(h uint64) bool {
	h >>= 64 - 14
	return f[h/64]&(1<<(h%64)) != 0
}

// compileSwitches resolves a group's configured switches.
func compileSwitches(g config.FilterGroup) groupSwitches {
	cat := index().cat
	var out groupSwitches
	for _, id := range g.Services {
		if i := cat.Index(id); i >= 0 {
			out.services.add(i)
		}
	}
	for _, e := range g.SafeSearch {
		out.safe |= engineBit(e)
	}
	out.strict = g.YouTubeMode != catalog.YouTubeModerate
	return out
}

// effective is g's switches with the dashboard's overrides for it.
func (g groupSwitches) effective(ov *compiledOverride) groupSwitches {
	if ov == nil {
		return g
	}
	g.services.or(ov.svcOn)
	g.services.andNot(ov.svcOff)
	g.safe = g.safe | ov.safeOn&^ov.safeOff
	return g
}

// switchesFor unions the switches of the groups that apply to a client now
// (the groups Lists takes the lists of), with the dashboard's overrides
// ov. A client to whom no group applies has none.
func (p *Policy) switchesFor(client netip.Addr, name string, newDev bool, now time.Time, ov overrideMap) switches {
	var out switches
	p.eachApplying(client, name, newDev, now, func(g *group) bool {
		w := &g.switches
		if o := ov[g.name]; o != nil {
			e := w.effective(o)
			w = &e
		}
		out.services.or(w.services)
		if w.safe&youtubeBit != 0 && w.strict {
			out.strict = true
		}
		out.safe |= w.safe
		return true
	})
	return out
}

// groupOfService is the first group that applies to a client now and
// blocks service i: its own groups before `default`.
func (p *Policy) groupOfService(client netip.Addr, name string, newDev bool, now time.Time, ov overrideMap, i int) string {
	found := ""
	p.eachApplying(client, name, newDev, now, func(g *group) bool {
		if g.switches.effective(ov[g.name]).services.has(i) {
			found = g.name
			return false
		}
		return true
	})
	return found
}

// groupOfEngine is the first group that applies to a client now and forces
// engine's safe search.
func (p *Policy) groupOfEngine(client netip.Addr, name string, newDev bool, now time.Time, ov overrideMap, engine string) string {
	found, bit := "", engineBit(engine)
	p.eachApplying(client, name, newDev, now, func(g *group) bool {
		if g.switches.effective(ov[g.name]).safe&bit != 0 {
			found = g.name
			return false
		}
		return true
	})
	return found
}

// eachApplying calls f with each group that applies to a client now, as
// Lists decides it: the client's own groups whose schedule is on, then
// `default` when its schedule is on; f returns false to stop.
func (p *Policy) eachApplying(client netip.Addr, name string, newDev bool, now time.Time, f func(g *group) bool) {
	if len(p.groups) == 0 {
		return
	}
	client = client.Unmap()
	local := now.In(p.loc)
	for i := range p.groups {
		g := &p.groups[i]
		if i == p.fallback || !(g.has(client, name) || newDev && i == p.newGroup) || !g.activeAt(local) {
			continue
		}
		if !f(g) {
			return
		}
	}
	if p.fallback >= 0 {
		if g := &p.groups[p.fallback]; g.activeAt(local) {
			f(g)
		}
	}
}

// hasGroup reports whether the configuration has a group of that name.
func (p *Policy) hasGroup(name string) bool {
	for i := range p.groups {
		if p.groups[i].name == name {
			return true
		}
	}
	return false
}

// anySwitches reports whether some group of the configuration has a
// service or a safe-search engine: without any, and without dashboard
// overrides, the query path skips the switches altogether.
func (p *Policy) anySwitches() bool {
	for i := range p.groups {
		if s := p.groups[i].switches; !s.services.empty() || s.safe != 0 {
			return true
		}
	}
	return false
}
