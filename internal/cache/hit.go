package cache

import (
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// The server's UDP wire shortcut (query.WireAnswerer; docs/architecture.md
// "Cache hits from the wire") answers a plain UDP cache hit from the query's
// wire form: AnswerWire finds the entry, lets every stage before the cache
// confirm that it would pass the query on, and writes the entry's template
// for the query's shape. The template is the server's own packing of the
// entry's answer (query.Request.Wire), kept by the stage the first time it
// answers a query of that shape from the entry through the chain, so the
// shortcut never sends an answer the chain did not give. Not when it
// stores the entry: most entries are never asked again, and packing each
// miss's answer a second time cost a miss about a seventh more
// instructions (scripts/workperquery.sh) for templates most would not use.

var _ query.WireAnswerer = (*Stage)(nil)

// hit is a fresh entry the shortcut may answer from.
type hit struct {
	c   *Cache
	e   *entry
	now int64 // Unix ns, on the cache's clock
}

// freshHit returns the entry for a question when answering it costs the
// cache nothing but the answer: the entry is fresh and not yet due for a
// prefetch (that, and every other case, is the general path's). pool is
// the query's (query.Event.Pool, set by the stages' query.Pooler). name is
// the question's name in lower-case presentation form; nothing keeps a
// reference to it, so it may be the caller's reused buffer. now is the
// query's arrival, which the caller has read already; a cache with a clock
// of its own uses that instead.
func (s *Stage) freshHit(name []byte, pool string, qtype, qclass uint16, shape uint8, now time.Time) (hit, bool) {
	c := s.c
	st, set := c.state()
	if st == nil {
		return hit{}, false
	}
	// The key lives only for the lookup, so the compiler copies a name of
	// up to 32 bytes on the stack; a longer one costs one allocation of its
	// length (BenchmarkAnswerWire reports it). No unsafe view of the
	// caller's buffer: the store must never see bytes that change.
	k := key{name: string(name), pool: pool, qtype: qtype, qclass: qclass}
	if shape&wireform.ShapeDO != 0 {
		k.flags |= flagDO
	}
	if shape&wireform.ShapeCD != 0 {
		k.flags |= flagCD
	}
	e := st.get(k)
	if c.ownClock {
		now = c.now()
	}
	ns := now.UnixNano()
	if e == nil || !e.fresh(ns) || set.prefetch && e.nearExpiry(ns) {
		return hit{}, false
	}
	return hit{c: c, e: e, now: ns}, true
}

// AnswerWire answers a plain UDP query from a fresh entry's template for
// its shape (query.WireAnswerer), counting the hit and setting the event
// as Answer does for one.
func (s *Stage) AnswerWire(dst []byte, q query.WireQuery, ev *query.Event, before []query.Passer) ([]byte, bool) {
	h, ok := s.freshHit(q.Name, ev.Pool, q.Qtype, q.Qclass, q.Shape, ev.Time)
	if !ok {
		return nil, false
	}
	w := h.e.template(q.Shape)
	if w == nil {
		return nil, false
	}
	ev.Name = h.e.name // the entry's own copy of the name asked
	for _, p := range before {
		if !p.Passes(ev, h.cnames()) {
			return nil, false
		}
	}
	out := w.tpl.Write(dst, q.ID, h.age()-w.age)
	h.c.hits.Add(1)
	ev.Cache, ev.Source = query.CacheHit, query.SourceCache
	v := h.e.renderView(h.now)
	ev.Reply, ev.Answer = v.msg, v.summary
	return out, true
}

// cnames are the CNAME targets of the answer as cached, in its order, for
// the stages that check an answer's names (the filter's CNAME check); nil
// when it has none. Read-only.
func (h hit) cnames() []string {
	if p := h.e.cnames; p != nil {
		return *p
	}
	return nil
}

// age is the entry's age in whole seconds, the unit its TTLs count down in.
func (h hit) age() int64 { return max(h.now-h.e.stored, 0) / int64(time.Second) }

// template is the entry's template for queries of shape, or nil.
func (e *entry) template(shape uint8) *wireSet {
	for w := e.wires.Load(); w != nil; w = w.next {
		if w.shape == shape {
			return w
		}
	}
	return nil
}

// keepWire keeps the server's packing of m — the entry's answer as the
// stage returns it at age seconds — as the template for the query shape of
// wire, unless the shortcut would not answer that query's like, the entry
// has a template for the shape already, or the answer is not one to keep
// (wire.Pack, wireform.NewTemplate).
func (e *entry) keepWire(wire query.WireForm, m *dns.Msg, age int64) {
	shape, ok := wire.Shape()
	if !ok || e.template(shape) != nil {
		return
	}
	packed, ok := wire.Pack(m)
	if !ok {
		return
	}
	if tpl, ok := wireform.NewTemplate(packed); ok {
		e.keep(shape, tpl, age)
	}
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
