package cache

import (
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// The server's fast path (docs/performance.md "Answer cache") answers a
// plain UDP cache hit from the query's wire form: it asks Fresh for the
// entry, lets every stage before the cache confirm that it would pass the
// query on, and writes the entry's Template for the query's shape. The
// template is the general path's own packed answer, kept by Remember the
// first time that path answers the question in that shape; so the fast path
// never decides an answer the chain did not give.

// Hit is a fresh entry the fast path may answer from.
type Hit struct {
	c   *Cache
	e   *entry
	k   key
	now int64 // Unix ns, on the cache's clock
}

// Fresh returns the entry for a question when answering it costs the cache
// nothing but the answer: the entry is fresh and not yet due for a prefetch
// (that, and every other case, is the general path's). name is the
// question's name in lower-case presentation form; Fresh keeps no reference
// to it, so it may be the caller's reused buffer. now is the query's
// arrival, which the caller has read already (the system clock costs a
// tenth of a hit on some machines); a cache with a clock of its own uses
// that instead.
func (s *Stage) Fresh(name []byte, qtype, qclass uint16, shape uint8, now time.Time) (Hit, bool) {
	c := s.c
	st, set := c.state()
	if st == nil {
		return Hit{}, false
	}
	k := key{name: unsafe.String(unsafe.SliceData(name), len(name)), qtype: qtype, qclass: qclass}
	if shape&wireform.ShapeDO != 0 {
		k.flags |= flagDO
	}
	if shape&wireform.ShapeCD != 0 {
		k.flags |= flagCD
	}
	e := st.get(k) // the store keeps no reference to the key it is asked
	if c.ownClock {
		now = c.now()
	}
	ns := now.UnixNano()
	if e == nil || !e.fresh(ns) || set.prefetch && e.nearExpiry(ns) {
		return Hit{}, false
	}
	// A string that outlives the call: the entry's own copy of the key's
	// name, the same bytes as the name asked (the store matched them).
	k.name = e.name
	return Hit{c: c, e: e, k: k, now: ns}, true
}

// Name is the question's name as the cache holds it, for the query event.
func (h Hit) Name() string { return h.k.name }

// CNAMEs are the CNAME targets of the answer as cached, in its order, for
// the stages that check an answer's names (the filter's CNAME check); nil
// when it has none. Read-only.
func (h Hit) CNAMEs() []string {
	if p := h.e.cnames; p != nil {
		return *p
	}
	return nil
}

// Write appends the answer for a query of shape with id to dst[:0]: the
// entry's template for that shape with its TTLs counted down to now. false
// when the general path has not answered a query of that shape yet.
func (h Hit) Write(dst []byte, shape uint8, id uint16) ([]byte, bool) {
	for w := h.e.wires.Load(); w != nil; w = w.next {
		if w.shape == shape {
			return w.tpl.Write(dst, id, h.Age()-w.age), true
		}
	}
	return nil, false
}

// Has reports whether the entry holds a template for queries of shape.
func (h Hit) Has(shape uint8) bool {
	for w := h.e.wires.Load(); w != nil; w = w.next {
		if w.shape == shape {
			return true
		}
	}
	return false
}

// Answer counts the hit and sets the event as the stage does for a hit:
// the cache fields, and the answer at this moment (TTLs counted down) as
// its Reply with that answer's summary.
func (h Hit) Answer(ev *query.Event) {
	h.c.hits.Add(1)
	ev.Cache, ev.Source = query.CacheHit, query.SourceCache
	v := h.e.renderView(h.now)
	ev.Reply, ev.Answer = v.msg, v.summary
}

// Age is the entry's age in whole seconds, the unit its TTLs count down in.
func (h Hit) Age() int64 { return max(h.now-h.e.stored, 0) / int64(time.Second) }

// Remember keeps wire, the general path's packed answer to a query of shape
// that the cache answered with answered (the message its Answer returned),
// as the entry's template for that shape. It does nothing unless answered
// is the entry's answer for this very second of its age — the entry may
// have been replaced or flushed since, or the second turned — or when the
// answer cannot be templated.
func (s *Stage) Remember(name []byte, qtype, qclass uint16, shape uint8, answered *dns.Msg, wire []byte) {
	h, ok := s.Fresh(name, qtype, qclass, shape, time.Now())
	if !ok || h.Has(shape) {
		return
	}
	v := h.e.view.Load()
	if v == nil || v.msg != answered {
		return
	}
	tpl, ok := wireform.NewTemplate(wire)
	if !ok {
		return
	}
	h.e.keep(shape, tpl, v.age)
}

// maxShapes bounds the templates an entry keeps: a household's clients
// come in a few shapes (with EDNS or not, DO or not); more are answered by
// the general path.
const maxShapes = 4

// wireSet is one entry's templates, a list replaced whole (never changed in
// place), so readers need no lock.
type wireSet struct {
	shape uint8
	tpl   wireform.Template // held here, not pointed to: one fewer allocation for a hit to read
	age   int64             // the entry's age, in seconds, the template was packed at
	next  *wireSet
	n     int // entries in the list from here
}

// keep adds tpl, packed at age, for shape unless the entry already has one
// or is full.
func (e *entry) keep(shape uint8, tpl *wireform.Template, age int64) {
	for {
		old := e.wires.Load()
		if old != nil && old.n >= maxShapes {
			return
		}
		for w := old; w != nil; w = w.next {
			if w.shape == shape {
				return
			}
		}
		n := 1
		if old != nil {
			n += old.n
		}
		if e.wires.CompareAndSwap(old, &wireSet{shape: shape, tpl: *tpl, age: age, next: old, n: n}) {
			return
		}
	}
}
