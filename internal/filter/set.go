package filter

import (
	"hash/maphash"
	"math/bits"
	"regexp"
	"slices"
	"strings"
)

// Set is a compiled rule set: every list's rules in one compact, immutable
// structure that answers "which lists have which kind of rule for exactly
// this name" with one hash and, on average, a few comparisons in one cache
// line.
//
// Guarantee: a Set is never modified after Build returns, so any number of
// goroutines may query it while a new one is built beside it; the engine
// swaps sets with one atomic pointer store.
//
// Layout (docs/filter.md): each distinct rule name is a 54-bit maphash of
// the name (never the name itself), held in keys sorted ascending; vals[i]
// is an index into combos, the distinct combinations of (slot, list) bits
// seen, which number a few hundred at most however many names there are,
// so the index normally lives in the key's spare low bits (packed).
// index[b] is where the bucket of hashes whose top bits are b starts, so a
// lookup is one hash, one index read and a short scan. That is 8 bytes per
// name plus about one byte of index: 1 million names in ~9 MB. Regexes are
// kept apart and checked only when the hashed rules do not decide.
type Set struct {
	seed    maphash.Seed
	shift   uint8    // bucket of a key: key >> shift
	index   []uint32 // len 2^b + 1; bucket b is keys[index[b]:index[b+1]]
	keys    []uint64 // hash with the low metaBits clear, or'd with the combo index when packed
	vals    []uint32 // combo index per key; nil when packed
	packed  bool
	combos  []combo
	regexes []regexRule
	depths  depths
}

// A slot is one kind of rule a list can have for a name.
type slot uint8

const (
	slotBlockExact slot = iota
	slotBlockSub
	slotBlockWild
	slotImpExact // $important block rules
	slotImpSub
	slotImpWild
	slotExceptExact // @@ exceptions in block lists
	slotExceptSub
	slotExceptWild
	slotAllowExact // allowlists and filter.allow
	slotAllowSub
	slotAllowWild
	nSlots
)

// combo holds, per slot, the bitmask of lists (bit i: list i) with a rule
// of that slot for one name.
type combo [nSlots]uint64

// MaxLists is how many lists (configured ones plus the inline rules) one
// Set can tell apart: a list is one bit of a uint64.
const MaxLists = 64

type regexRule struct {
	re   *regexp.Regexp
	text string
	list uint8
	slot slot // slotBlockExact, slotExceptExact or slotAllowExact
}

// During building a rule is one uint64: the name's hash with its low
// metaBits cleared, or'd with the rule's (slot, list). Sorting these sorts
// by name and groups a name's rules together, at 8 bytes a rule. Giving up
// 10 of the hash's 64 bits leaves 54: with a million names, the chance that
// a query name's hash meets one of them by accident is 1e6/2^54 ≈ 6e-11 per
// lookup, one false block in thousands of years of a household's queries.
const (
	metaBits = 10 // 4 bits of slot, 6 of list
	metaMask = 1<<metaBits - 1
)

// Builder collects rules for a new Set. It holds 8 bytes per rule until
// Build, and nothing after.
type Builder struct {
	seed    maphash.Seed
	items   []uint64
	regexes []regexRule
	depths  depths
}

// depths records, by label count, which names carry rules: bit d of self
// is set when some exact (or any) rule's name has d labels, bit d of parent
// when some subtree or wildcard rule's does. A lookup skips the suffixes of
// a query name no rule could match, so a long name costs only the lookups
// of the depths the lists really use (the 63rd bit stands for 63 or more).
type depths struct{ self, parent uint64 }

func depthBit(labels int) uint64 { return 1 << min(labels, 63) }

// NewBuilder starts a set; sizeHint is the number of rules expected (the
// previous build's count), so the item slice grows at most once.
func NewBuilder(sizeHint int) *Builder {
	return &Builder{seed: maphash.MakeSeed(), items: make([]uint64, 0, sizeHint)}
}

// Len is the number of rules added so far.
func (b *Builder) Len() int { return len(b.items) + len(b.regexes) }

// Mark returns a point to roll back to when a list turns out to be bad
// half-way (Truncate).
func (b *Builder) Mark() (int, int) { return len(b.items), len(b.regexes) }

// Truncate drops every rule added since Mark.
func (b *Builder) Truncate(items, regexes int) {
	b.items, b.regexes = b.items[:items], b.regexes[:regexes]
}

// MaxTotalRegexes bounds the regexes of all lists together: each costs
// every query that the hashed rules do not decide about 130 ns on the
// development machine (docs/performance.md).
const MaxTotalRegexes = 32

// Add adds a rule of list (0 ≤ list < MaxLists); allow says the list is an
// allowlist (or filter.allow), where every rule allows. It reports false for
// a regex past MaxTotalRegexes, which is dropped.
func (b *Builder) Add(list int, allow bool, r Rule) bool {
	s := ruleSlot(r, allow)
	if r.Kind == Regex {
		if len(b.regexes) >= MaxTotalRegexes {
			return false
		}
		b.regexes = append(b.regexes, regexRule{re: r.Re, text: r.Text, list: uint8(list), slot: s})
		return true
	}
	b.items = append(b.items, maphash.String(b.seed, r.Name)&^metaMask|uint64(s)<<6|uint64(list))
	bit := depthBit(strings.Count(r.Name, ".") + 1)
	b.depths.self |= bit
	if r.Kind != Exact {
		b.depths.parent |= bit
	}
	return true
}

func ruleSlot(r Rule, allow bool) slot {
	var base slot
	switch {
	case allow:
		base = slotAllowExact
	case r.Exception:
		base = slotExceptExact
	case r.Important:
		base = slotImpExact
	default:
		base = slotBlockExact
	}
	switch r.Kind {
	case Subtree:
		return base + 1
	case Wildcard:
		return base + 2
	default: // Exact, and Regex, whose slot says only block, exception or allow
		return base
	}
}

// Build sorts and de-duplicates the rules into a Set. The Builder must not
// be used afterwards.
func (b *Builder) Build() *Set {
	items := b.items
	b.items = nil
	slices.Sort(items)
	distinct := 0
	for i := range items {
		if i == 0 || items[i]&^metaMask != items[i-1]&^metaMask {
			distinct++
		}
	}
	s := &Set{seed: b.seed, keys: make([]uint64, 0, distinct), vals: make([]uint32, 0, distinct), regexes: b.regexes, depths: b.depths}
	interned := map[combo]uint32{}
	for i := 0; i < len(items); {
		var c combo
		key := items[i] &^ metaMask
		j := i
		for ; j < len(items) && items[j]&^metaMask == key; j++ {
			m := items[j] & metaMask
			c[m>>6] |= 1 << (m & 63)
		}
		id, ok := interned[c]
		if !ok {
			id = uint32(len(s.combos))
			interned[c] = id
			s.combos = append(s.combos, c)
		}
		s.keys = append(s.keys, key)
		s.vals = append(s.vals, id)
		i = j
	}
	// The combination's index fits the key's spare low bits whenever there
	// are at most 1024 combinations (always, for real lists): then a lookup
	// reads one array, not two, and a name costs 8 bytes, not 12.
	if len(s.combos) <= 1<<metaBits {
		for i, id := range s.vals {
			s.keys[i] |= uint64(id)
		}
		s.vals, s.packed = nil, true
	}
	s.buildIndex()
	return s
}

// buildIndex picks 2^b buckets for about four keys each.
func (s *Set) buildIndex() {
	b := max(bits.Len(uint(len(s.keys)/4)), 1)
	s.shift = uint8(64 - b)
	s.index = make([]uint32, (1<<b)+1)
	k := 0
	for bucket := range 1 << b {
		s.index[bucket] = uint32(k)
		for k < len(s.keys) && int(s.keys[k]>>s.shift) == bucket {
			k++
		}
	}
	s.index[1<<b] = uint32(len(s.keys))
}

// Names is the number of distinct names in the set.
func (s *Set) Names() int {
	if s == nil {
		return 0
	}
	return len(s.keys)
}

// lookup returns the combination of rules for exactly name, or nil.
func (s *Set) lookup(name string) *combo {
	if len(s.keys) == 0 {
		return nil
	}
	key := maphash.String(s.seed, name) &^ metaMask
	bucket := key >> s.shift
	for i, end := s.index[bucket], s.index[bucket+1]; i < end; i++ {
		k := s.keys[i]
		switch h := k &^ metaMask; {
		case h == key && s.packed:
			return &s.combos[k&metaMask]
		case h == key:
			return &s.combos[s.vals[i]]
		case h > key:
			return nil
		}
	}
	return nil
}

// hit is the first rule found for one class of decision.
type hit struct {
	found bool
	list  int
	slot  slot
	name  string // the rule's name (a suffix of the query name) or the regex text
	regex bool
}

func (h *hit) set(mask uint64, sl slot, name string) {
	if h.found || mask == 0 {
		return
	}
	*h = hit{found: true, list: bits.TrailingZeros64(mask), slot: sl, name: name}
}

// verdict is what the set decides for a name and a client's lists.
type verdict struct {
	blocked bool
	allowed bool // an allow rule or exception decided it (for explain)
	why     hit
	// service is 1 + the catalogue index of the blocked service that
	// decided, 0 when a list did (or nothing blocked); domain is its
	// domain that matched (services.go). Only check.decide sets them.
	service int
	domain  string
	hash    uint64 // nameHash of the name when check.decide walked it, else 0
}

// decide applies the order of docs/design.md#filter-matching for name (lower-case, no trailing dot)
// and the lists in mask: an allowlist entry wins over everything; then
// $important block rules; then @@ exceptions; then block rules. It walks
// the name and its parents (one lookup each) and allocates nothing.
func (s *Set) decide(name string, mask uint64) verdict {
	var allow, imp, except, block hit
	self := true
	labels := strings.Count(name, ".") + 1
	for n := name; ; labels-- {
		want := s.depths.parent
		if self {
			want = s.depths.self
		}
		var c *combo
		if want&depthBit(labels) != 0 { // else no rule has a name of this many labels
			c = s.lookup(n)
		}
		if c != nil {
			if self {
				allow.set(c[slotAllowExact]&mask, slotAllowExact, n)
				imp.set(c[slotImpExact]&mask, slotImpExact, n)
				except.set(c[slotExceptExact]&mask, slotExceptExact, n)
				block.set(c[slotBlockExact]&mask, slotBlockExact, n)
			} else {
				allow.set(c[slotAllowWild]&mask, slotAllowWild, n)
				imp.set(c[slotImpWild]&mask, slotImpWild, n)
				except.set(c[slotExceptWild]&mask, slotExceptWild, n)
				block.set(c[slotBlockWild]&mask, slotBlockWild, n)
			}
			allow.set(c[slotAllowSub]&mask, slotAllowSub, n)
			imp.set(c[slotImpSub]&mask, slotImpSub, n)
			except.set(c[slotExceptSub]&mask, slotExceptSub, n)
			block.set(c[slotBlockSub]&mask, slotBlockSub, n)
			if allow.found {
				return verdict{allowed: true, why: allow}
			}
		}
		i := strings.IndexByte(n, '.')
		if i < 0 {
			break
		}
		n, self = n[i+1:], false
	}
	if len(s.regexes) > 0 {
		s.regexHits(name, mask, &allow, &except, &block)
		if allow.found {
			return verdict{allowed: true, why: allow}
		}
	}
	switch {
	case imp.found:
		return verdict{blocked: true, why: imp}
	case except.found:
		return verdict{allowed: true, why: except}
	case block.found:
		return verdict{blocked: true, why: block}
	}
	return verdict{}
}

// regexHits checks the regexes of the lists in mask: the block regexes only
// when nothing blocks yet, the allowing ones only when something would.
func (s *Set) regexHits(name string, mask uint64, allow, except, block *hit) {
	for pass := 0; pass < 2; pass++ {
		wouldBlock := block.found
		for i := range s.regexes {
			r := &s.regexes[i]
			if mask&(1<<r.list) == 0 {
				continue
			}
			var h *hit
			switch {
			case pass == 0 && r.slot == slotBlockExact && !block.found:
				h = block
			case pass == 1 && wouldBlock && r.slot == slotAllowExact && !allow.found:
				h = allow
			case pass == 1 && wouldBlock && r.slot == slotExceptExact && !except.found:
				h = except
			default:
				continue
			}
			if r.re.MatchString(name) {
				*h = hit{found: true, list: int(r.list), slot: r.slot, name: r.text, regex: true}
			}
		}
	}
}

// ruleText is a hit's rule in its normalised written form.
func (h hit) ruleText() string {
	if h.regex {
		if h.slot == slotExceptExact {
			return "@@" + h.name
		}
		return h.name
	}
	var b strings.Builder
	sl := h.slot
	if sl >= slotExceptExact && sl <= slotExceptWild {
		b.WriteString("@@")
	}
	switch (sl - slotBlockExact) % 3 {
	case 1:
		b.WriteString("||" + h.name + "^")
	case 2:
		b.WriteString("*." + h.name)
	default:
		b.WriteString(h.name)
	}
	if sl >= slotImpExact && sl <= slotImpWild {
		b.WriteString("$important")
	}
	return b.String()
}
