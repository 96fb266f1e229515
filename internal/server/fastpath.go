package server

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// fastPath answers plain UDP cache hits on the socket's reader, straight
// from the query's wire form: no dns.Msg is parsed or packed, no goroutine
// woken. At cache-hit rates that work, not the cache, was what a query
// cost (docs/performance.md#answer-cache).
//
// Guarantee: the fast path sends exactly the bytes the general path (serve)
// would send, but for the TTLs' countdown and the ID, and records the same
// query event; everything it cannot be sure of goes the general way. It
// answers only when
//   - wireform.ParseQuery reads the query as ordinary (one lower-case
//     question, at most an EDNS 0 OPT without options that matter),
//   - the client is inside dns.allow,
//   - the client's size limit is the one its shape's template was packed
//     for (512 bytes without EDNS, 1232 with),
//   - a stage is a query.WireAnswerer (the cache), every stage before it
//     is a query.Passer and passes the query, and
//   - the answerer has a fresh answer packed for the query's shape: the
//     general path's own packing (wireForm, handed down in Request.Wire),
//     which the answerer kept when it answered such a query in the chain.
//
// The server reads the answerer; it never writes to it.
type fastPath struct {
	passers []query.Passer // the stages before the answerer, in order
	poolers []query.Pooler // those of them that choose a query's pool: Event.Pool is set before the answerer looks
	answer  query.WireAnswerer
	// reuse is set when every sink is a query.EventCopier: a hit's event
	// is then the reader's own, overwritten by its next hit, and a hit
	// allocates nothing (garbage per hit is what makes the collector run
	// at cache-hit rates; docs/performance.md#work-per-query, re-measured
	// by scripts/workperquery.sh and BenchmarkCacheHit's allocs/op).
	reuse bool
}

// newFastPath is the fast path over a generation's stages and sinks, or
// nil when no stage is a query.WireAnswerer or a stage before it is not a
// query.Passer.
func newFastPath(stages []query.Stage, sinks []query.Sink) *fastPath {
	for i, st := range stages {
		a, ok := st.(query.WireAnswerer)
		if !ok {
			continue
		}
		f := &fastPath{answer: a, reuse: copiers(sinks)}
		for _, before := range stages[:i] {
			p, ok := before.(query.Passer)
			if !ok {
				return nil
			}
			f.passers = append(f.passers, p)
			if pl, ok := before.(query.Pooler); ok {
				f.poolers = append(f.poolers, pl)
			}
		}
		return f
	}
	return nil
}

// copiers reports whether every sink is a query.EventCopier.
func copiers(sinks []query.Sink) bool {
	for _, s := range sinks {
		if _, ok := s.(query.EventCopier); !ok {
			return false
		}
	}
	return true
}

// canonicalLimit reports whether a query's size limit is the one its
// shape's template is made for: 512 bytes without EDNS, 1232 with. An
// answer packed under another limit may differ (fit drops records to fit
// a smaller one), so other clients take the general path.
func canonicalLimit(q wireform.Query) bool {
	edns := q.Shape&wireform.ShapeEDNS != 0
	lim := udpLimit(edns, q.UDPSize)
	return edns && lim == maxUDPAnswer || !edns && lim == minUDPAnswer
}

// answerFast writes the answer to the datagram from the cache into dst and
// returns it with its query's event and generation, to be recorded by
// finishFast once written; or it reports false having done nothing the
// general path would notice. name is the caller's buffer for the
// question's name, dst its buffer for the answer, reused once written;
// scratch is its event, which the query's event is when every sink copies
// what it keeps (fastPath.reuse), reused once recorded. Otherwise the
// event is the query's own: a sink may keep it.
func (s *Server) answerFast(wire []byte, name *[wireform.MaxName]byte, client netip.Addr, dst []byte, scratch *query.Event) ([]byte, *generation, *query.Event, bool) {
	g := s.acquire()
	out, ev, ok := g.answerFast(wire, name, client, dst, scratch)
	if !ok {
		g.release()
		return nil, nil, nil, false
	}
	return out, g, ev, true
}

func (g *generation) answerFast(wire []byte, name *[wireform.MaxName]byte, client netip.Addr, dst []byte, scratch *query.Event) ([]byte, *query.Event, bool) {
	f := g.fast
	if f == nil {
		return nil, nil, false
	}
	q, ok := wireform.ParseQuery(wire, name)
	if !ok || !canonicalLimit(q) || isTransfer(q.Qtype) || !allowed(g.st.Allow, client) {
		return nil, nil, false
	}
	now := time.Now()
	if !g.st.Limit.take(client, now) {
		return nil, nil, false // the general path refuses it (docs/protocol.md "Rate limit")
	}
	ev := scratch
	if !f.reuse {
		ev = new(query.Event)
	}
	*ev = query.Event{
		Time: now, Client: client, Proto: query.UDP,
		Qtype: q.Qtype, Qclass: q.Qclass,
		Resolved: true, Rcode: query.RcodeNone,
	}
	if g.st.Devices != nil {
		g.st.Devices.Identify(ev)
	} else if g.st.Names != nil {
		ev.ClientName = g.st.Names.Name(client)
	}
	for _, p := range f.poolers { // the cache keys answers by pool (docs/filter.md "Per-group upstreams")
		if pool := p.PoolOf(ev); pool != "" {
			ev.Pool = pool
		}
	}
	wq := query.WireQuery{Name: q.Name, Qtype: q.Qtype, Qclass: q.Qclass, Shape: q.Shape, ID: q.ID}
	out, ok := f.answer.AnswerWire(dst, wq, ev, f.passers)
	if !ok {
		g.st.Limit.refund(client) // the general path takes its own token
		if u, ok := g.st.Devices.(uncounter); ok {
			u.Uncount(ev) // and identifies, and counts, the query again
		}
		return nil, nil, false
	}
	ev.Rcode = int(out[3] & 0xF)
	ev.Duration = time.Since(ev.Time)
	return out, ev, true
}

// finishFast records a fast answer's query once its write is done and
// releases its generation; delivered is false when the write failed.
func (s *Server) finishFast(g *generation, ev *query.Event, delivered bool) {
	if !delivered {
		s.stats.undelivered.Add(1)
		ev.Rcode, ev.Reply, ev.Answer = query.RcodeNone, nil, ""
	}
	s.stats.fastAnswers.Add(1) // sent or tried: the fast path's own count, for tests
	s.record(g.st, ev)
	g.release()
}

// wireForm packs answers to a plain UDP query, for the chain's
// query.Request.Wire: the general path's own relay and fit, on a scratch
// copy of the query's state, so the query's event and answer are
// untouched. The wire form is read only when a stage asks for the shape
// (a hit without a template for it), so a miss costs nothing here.
// A pointer to the query's own pending, so handing it down costs no
// allocation.
type wireForm pending

// wireFormOf is the Request.Wire for q, or nil when there is no fast path
// or q is not plain UDP.
func (g *generation) wireFormOf(q *pending) query.WireForm {
	if g.fast == nil || q.ev.Proto != query.UDP {
		return nil
	}
	return (*wireForm)(q)
}

// Shape is the query's shape, when the fast path would answer its like:
// a query wireform.ParseQuery reads, with its shape's canonical size
// limit.
func (w *wireForm) Shape() (uint8, bool) {
	var name [wireform.MaxName]byte
	wq, ok := wireform.ParseQuery(w.raw, &name)
	if !ok || !canonicalLimit(wq) {
		return 0, false
	}
	return wq.Shape, true
}

// Pack is the answer serve would send for m. A truncated answer is not
// one to keep: its event's Reply is the message fit cut, which the fast
// path would not have (the bytes would be the same, the log line not).
func (w *wireForm) Pack(m *dns.Msg) ([]byte, bool) {
	// Its event and answer in it (inline): no sink sees a scratch query.
	scratch := &pending{req: w.req, opt: w.opt, inline: true}
	scratch.ev = &scratch.ownEv
	scratch.ev.Proto = query.UDP
	a := scratch.relay(m)
	limit := scratch.sizeLimit()
	out, err := fit(a, limit, nil)
	if err != nil || len(out) > limit || len(out) < headerSize || out[2]&0x02 != 0 { // TC
		return nil, false
	}
	return out, true
}
