package server

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

const headerSize = 12 // a DNS header, RFC 1035 §4.1.1

// headerOK reports whether wire can be a query at all: a whole header with
// QR clear. Anything else is dropped unanswered (docs/design.md#answer-size): an answer to
// garbage or to a response could be reflected at a spoofed source, or loop
// between two servers.
func headerOK(wire []byte) bool { return len(wire) >= headerSize && wire[2]&0x80 == 0 }

// pending is one query on its way through the handler: the parsed message
// and the query event (docs/design.md#query-event) it fills in for the log, the counters and
// every query.Sink.
type pending struct {
	gen *generation
	st  *State
	ev  *query.Event
	req *dns.Msg   // nil when only the header parsed
	opt *dns.OPT   // the client's OPT record; nil without EDNS
	ans *answerMsg // the answer base last built (reply.go)
	raw []byte     // the query as received, for Request.Wire (fastpath.go)

	// Held here rather than allocated one by one: a query costs one
	// allocation for all of them (docs/performance.md#answer-cache). The
	// pending is never reused, so a stage may keep r.Msg past the query (the
	// cache's shared exchange does).
	parsed  dns.Msg       // what req points to
	r       query.Request // what the chain sees
	up      dns.Msg       // r.Msg: the query as sent on
	upOPT   dns.OPT       // up's OPT record
	upExtra [1]dns.RR     // up's additional section

	// The event and the first answer built (its Reply) live here too when
	// every sink copies what it keeps (query.EventCopier): nothing holds
	// them past the query then. Otherwise each is allocated on its own: a
	// sink may keep the event, and should not keep the rest alive with it.
	// BenchmarkMiss's allocs/op re-measures what this saves.
	inline bool // ownEv and ownAns are in use
	ownEv  query.Event
	ownAns answerMsg
}

// serve answers one query message and hands the wire answer to send, unless
// nothing is to be sent (no parsable header, a cancelled query). It records
// the query's event after send returns, so an answer that could not be
// delivered (send's error: UDP to a closed port, a failed TCP write) is
// counted as such, not as answered (docs/design.md#robustness). It returns by the time ctx
// ends plus the chain's own return and send's.
func (s *Server) serve(ctx context.Context, wire []byte, client netip.Addr, proto query.Proto, send func([]byte) error) {
	s.serveAs(ctx, wire, client, proto, "", send)
}

// serveAs is serve for a client that presented a ClientID (a DoH path, a
// DoT SNI label: clientid.go), already validated; "" for none.
func (s *Server) serveAs(ctx context.Context, wire []byte, client netip.Addr, proto query.Proto, clientID string, send func([]byte) error) {
	if !headerOK(wire) {
		s.stats.malformed.Add(1)
		return
	}
	g := s.acquire()
	defer g.release()
	q := &pending{gen: g, st: g.st, inline: copiers(g.st.Sinks)}
	q.ev = &q.ownEv
	if !q.inline {
		q.ev = new(query.Event)
	}
	*q.ev = query.Event{
		Time: time.Now(), Client: client, Proto: proto, Source: query.SourceServer, Rcode: query.RcodeNone,
		ClientID: clientID,
	}
	buf := packBuffers.Get().(*[]byte)
	defer packBuffers.Put(buf)
	q.raw = wire
	var out []byte
	if m := s.answer(ctx, q, wire); m != nil {
		out = s.pack(q, m, *buf)
	}
	q.ev.Duration = time.Since(q.ev.Time)
	if out != nil && send(out) != nil {
		s.stats.undelivered.Add(1)
		q.ev.Rcode, q.ev.Reply = query.RcodeNone, nil // nothing reached the client
	}
	s.record(q.st, q.ev)
}

// packBuffers hold the wire answers while they are sent: every send copies
// or writes the answer before it returns (a UDP datagram, a TCP frame, a
// DoH body), so the buffer is free again once serve returns. A buffer fits
// any UDP answer; a larger stream answer packs into one of its own.
var packBuffers = sync.Pool{New: func() any {
	b := make([]byte, maxUDPAnswer)
	return &b
}}

// answer checks the query (docs/design.md#answer-size: REFUSED first, then FORMERR, NOTIMP,
// BADVERS) and, if it passes, resolves it. nil means send nothing.
func (s *Server) answer(ctx context.Context, q *pending, wire []byte) *dns.Msg {
	req := &q.parsed
	if err := req.Unpack(wire); err != nil {
		if !allowed(q.st.Allow, q.ev.Client) {
			q.ev.Source = query.SourceRefused
			return headerOnly(wire, dns.RcodeRefused)
		}
		return headerOnly(wire, dns.RcodeFormatError)
	}
	q.req = req
	if len(req.Question) == 1 {
		qq := req.Question[0]
		q.ev.Name, q.ev.Qtype, q.ev.Qclass = qq.Name, qq.Qtype, qq.Qclass
	}
	opt, ok := clientOPT(req)
	q.opt = opt
	switch {
	case !allowed(q.st.Allow, q.ev.Client):
		// Before every other check: a client nxdns does not serve learns
		// nothing about what it would have said (docs/design.md#config-allow).
		q.ev.Source = query.SourceRefused
		if !ok || opt != nil && opt.Version() != 0 {
			q.opt = nil // no OPT the client could not have meant
		}
		return q.reply(dns.RcodeRefused)
	case !q.st.Limit.Allow(q.ev.Client, q.ev.Time):
		// Past the device's rate (docs/protocol.md "Rate limit"): as
		// cheap as a refusal can be, and before any other check.
		q.ev.Source = query.SourceRateLimited
		if !ok || opt != nil && opt.Version() != 0 {
			q.opt = nil
		}
		m := q.base()
		m.Rcode = dns.RcodeRefused
		q.attachOPT(m, rateLimited())
		return m
	case !ok:
		return q.reply(dns.RcodeFormatError) // RFC 6891 §6.1.1: more than one OPT
	case req.Opcode != dns.OpcodeQuery:
		return q.notImplemented()
	case len(req.Question) != 1:
		return q.reply(dns.RcodeFormatError)
	case opt != nil && opt.Version() != 0:
		return q.reply(dns.RcodeBadVers) // RFC 6891 §6.1.3
	case isTransfer(req.Question[0].Qtype):
		// A zone transfer is several messages and no forwarder's business.
		return q.reply(dns.RcodeNotImplemented)
	case req.Question[0].Qclass != dns.ClassINET:
		// nxdns serves class IN only (docs/protocol.md "Classes"): CHAOS,
		// Hesiod, NONE and ANY, version.bind and id.server included, are
		// refused here and never forwarded, where a public upstream's
		// refusal would say nothing a client needs.
		return q.reply(dns.RcodeRefused)
	}
	s.clientOptions(q) // a trusted forwarder's client MAC and subnet (clientid.go)
	return s.resolve(ctx, q)
}

// notImplemented answers an opcode nxdns does not implement with NOTIMP and
// only the header RFC 1035 §4.1.1 defines for it: ID, opcode and RD copied,
// QR set. RA and CD describe a query nxdns would resolve; an operation it
// does not implement gets neither (genreport's opcode and opcodeflg tests).
// The question and OPT are kept, as for every other error nxdns sends.
func (q *pending) notImplemented() *dns.Msg {
	m := q.reply(dns.RcodeNotImplemented)
	m.RecursionAvailable, m.CheckingDisabled = false, false
	return m
}

// resolve sends the query down the stage chain (docs/design.md#stage-chain: local answers,
// policy, cache, then the route) and turns the outcome into the client's
// answer.
func (s *Server) resolve(ctx context.Context, q *pending) *dns.Msg {
	q.ev.Resolved = true
	if q.st.Devices != nil {
		q.st.Devices.Identify(q.ev)
	} else if q.st.Names != nil {
		q.ev.ClientName = q.st.Names.Name(q.ev.Client)
	}
	r := &q.r
	*r = query.Request{
		Msg:      q.upstreamQuery(),
		Deadline: q.ev.Time.Add(q.st.budget()),
		Event:    q.ev,
		Wire:     q.gen.wireFormOf(q),
		// A UDP query is served under the server's own ctx (listen.go).
		Lasting: q.ev.Proto == query.UDP,
	}
	resp, err := q.gen.chain.Answer(ctx, r)
	if err != nil || resp == nil {
		return q.failure(ctx, err)
	}
	return q.relay(resp)
}

// upstreamUDPSize is the EDNS buffer size nxdns advertises, upstream and to
// its clients: 1232 bytes fits the IPv6 minimum MTU without fragmentation
// (DNS Flag Day 2020), the default of BIND 9.18, Unbound and Knot.
const upstreamUDPSize = 1232

// upstreamQuery builds the query a resolver sends on, rather than passing the
// client's message through:
//   - the client's question, its name's case kept (0x20 clients check it);
//   - a random ID: the client's is restored on the answer, and a guessable ID
//     would help spoof a forward zone's UDP answers;
//   - RD always set: nxdns is the client's recursive service, and an upstream
//     answering an RD=0 query with REFUSED would be blamed as a peer fault;
//   - CD as the client set it (RFC 6840 §5.9), and AD always set (§5.7):
//     the upstream then says whether it validated the answer, which the
//     cache keeps for every client, and the reply gives AD to those that
//     set DO or AD (§5.8; reply.go relay);
//   - nxdns's own OPT record, never the client's: its options are hop-by-hop
//     (cookies, padding, keepalive) or private (client subnet, RFC 7871), and
//     its buffer size describes the client's path, not ours. Only the DO bit
//     follows the client, so DNSSEC records come back to clients that asked.
//
// It is built once per query, in the pending's own fields.
func (q *pending) upstreamQuery() *dns.Msg {
	req := q.req
	q.up = dns.Msg{
		MsgHdr: dns.MsgHdr{
			Id:                uint16(rand.Uint32()),
			Opcode:            dns.OpcodeQuery,
			RecursionDesired:  true,
			CheckingDisabled:  req.CheckingDisabled,
			AuthenticatedData: true,
		},
		Question: req.Question[:1:1],
	}
	setOPT(&q.upOPT, q.opt != nil && q.opt.Do())
	q.upExtra[0] = &q.upOPT
	q.up.Extra = q.upExtra[:]
	return &q.up
}

// newOPT is nxdns's OPT record: version 0, its buffer size, the DO bit given.
func newOPT(do bool) *dns.OPT {
	o := new(dns.OPT)
	setOPT(o, do)
	return o
}

func setOPT(o *dns.OPT, do bool) {
	*o = dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(upstreamUDPSize)
	if do {
		o.SetDo()
	}
}

// clientOPT finds the query's OPT record; ok is false when there is more
// than one, which RFC 6891 §6.1.1 answers with FORMERR.
func clientOPT(req *dns.Msg) (opt *dns.OPT, ok bool) {
	for _, rr := range req.Extra {
		if o, isOPT := rr.(*dns.OPT); isOPT {
			if opt != nil {
				return nil, false
			}
			opt = o
		}
	}
	return opt, true
}

func allowed(allow []netip.Prefix, client netip.Addr) bool {
	for _, p := range allow {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

func isTransfer(qtype uint16) bool { return qtype == dns.TypeAXFR || qtype == dns.TypeIXFR }

// headerOnly answers a message whose header parsed but whose body did not,
// with rcode (FORMERR, or REFUSED to a client outside dns.allow): the
// header's ID, opcode and RD echoed, no question (it could not be read) and
// no OPT (RFC 6891 §7: FORMERR for a malformed OPT carries none).
func headerOnly(wire []byte, rcode int) *dns.Msg {
	bits := binary.BigEndian.Uint16(wire[2:])
	return &dns.Msg{MsgHdr: dns.MsgHdr{
		Id:                 binary.BigEndian.Uint16(wire),
		Response:           true,
		Opcode:             int(bits>>11) & 0xF,
		RecursionDesired:   bits&(1<<8) != 0,
		RecursionAvailable: true,
		Rcode:              rcode,
	}}
}
