package server

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/wireform"
)

// fastPath answers plain UDP cache hits on the socket's reader, straight
// from the query's wire form: no dns.Msg is parsed or packed, no goroutine
// woken. At cache-hit rates that work, not the cache, was what a query
// cost (docs/performance.md "Answer cache").
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
//   - the cache has a fresh entry not due for a prefetch,
//   - every stage before the cache is a query.Passer and passes it, and
//   - the entry holds a template for the query's shape: the general path's
//     own packed answer to an identical query, kept by keepTemplate.
type fastPath struct {
	passers []query.Passer // the stages before the cache, in order
	cache   *cache.Stage
}

// newFastPath is the fast path over a generation's stages, or nil when
// there is no cache or a stage before it is not a query.Passer.
func newFastPath(stages []query.Stage) *fastPath {
	for i, st := range stages {
		c, ok := st.(*cache.Stage)
		if !ok {
			continue
		}
		f := &fastPath{cache: c}
		for _, before := range stages[:i] {
			p, ok := before.(query.Passer)
			if !ok {
				return nil
			}
			f.passers = append(f.passers, p)
		}
		return f
	}
	return nil
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
// its query's event into ev, and returns the answer with the query's
// generation, to be recorded by finishFast once written; or it reports
// false having done nothing the general path would notice. name is the
// caller's buffer for the question's name; dst and ev are the caller's
// too, reused once the query is recorded.
func (s *Server) answerFast(wire []byte, name *[wireform.MaxName]byte, client netip.Addr, dst []byte, ev *query.Event) ([]byte, *generation, *query.Event, bool) {
	g := s.acquire()
	out, ok := g.answerFast(wire, name, client, dst, ev)
	if !ok {
		g.release()
		return nil, nil, nil, false
	}
	return out, g, ev, true
}

func (g *generation) answerFast(wire []byte, name *[wireform.MaxName]byte, client netip.Addr, dst []byte, ev *query.Event) ([]byte, bool) {
	f := g.fast
	if f == nil {
		return nil, false
	}
	q, ok := wireform.ParseQuery(wire, name)
	if !ok || !canonicalLimit(q) || isTransfer(q.Qtype) || !allowed(g.st.Allow, client) {
		return nil, false
	}
	arrival := time.Now()
	hit, ok := f.cache.Fresh(q.Name, q.Qtype, q.Qclass, q.Shape, arrival)
	if !ok || !hit.Has(q.Shape) {
		return nil, false
	}
	*ev = query.Event{
		Time: arrival, Client: client, Proto: query.UDP,
		Name: hit.Name(), Qtype: q.Qtype, Qclass: q.Qclass,
		Resolved: true, Rcode: query.RcodeNone,
	}
	if g.st.Names != nil {
		ev.ClientName = g.st.Names.Name(client)
	}
	for _, p := range f.passers {
		if !p.Passes(ev, hit.CNAMEs()) {
			return nil, false
		}
	}
	out, ok := hit.Write(dst, q.Shape, q.ID)
	if !ok {
		return nil, false
	}
	ev.Rcode = int(out[3] & 0xF)
	hit.Answer(ev)
	ev.Duration = time.Since(ev.Time)
	return out, true
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

// keepTemplate hands the general path's answer out to a UDP query that the
// cache answered with got to the entry, as the template for queries of its
// shape, when the fast path could have answered that query. A truncated
// answer is not kept: its event's Reply is the message fit cut, which the
// fast path would not have (the bytes would be the same, the log line not).
func (g *generation) keepTemplate(wire []byte, got *dns.Msg, out []byte) {
	if g.fast == nil || len(out) < headerSize || out[2]&0x02 != 0 { // TC
		return
	}
	var name [wireform.MaxName]byte
	q, ok := wireform.ParseQuery(wire, &name)
	if !ok || !canonicalLimit(q) {
		return
	}
	g.fast.cache.Remember(q.Name, q.Qtype, q.Qclass, q.Shape, got, out)
}
