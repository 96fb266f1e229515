package query

import "github.com/miekg/dns"

// The UDP wire shortcut (docs/architecture.md "Cache hits from the wire"):
// the server answers a plain UDP cache hit straight from the query's wire
// form, without parsing it into a message or running the chain. The cache
// keeps, inside the chain, the packed answer for each query shape it has
// answered (Request.Wire); the server only reads it back (WireAnswerer).
// These interfaces are the seam, so the server imports no stage.

// WireQuery is a plain UDP query as the server read it from the wire: one
// question, its name in lower-case presentation form (the server's reused
// buffer: an answerer keeps no reference to it), and its shape — the
// header bits and EDNS facts that change the answer's bytes (the server's
// wireform shape bits).
type WireQuery struct {
	Name          []byte
	Qtype, Qclass uint16
	Shape         uint8
	ID            uint16
}

// A WireAnswerer is a stage that can answer a WireQuery from its own state
// exactly as the chain would. The server asks it only when every stage
// before it is a Passer.
type WireAnswerer interface {
	Stage
	// AnswerWire appends the answer to q, with q's ID, to dst[:0] and
	// reports true; or it reports false, having changed nothing the general
	// path would notice, and the server answers q the general way. ev comes
	// with Time (the arrival, the clock's one read), Client, ClientName,
	// Proto, Qtype and Qclass set; AnswerWire sets Name, then asks each of
	// before, in order, whether it passes the query, and on an answer sets
	// the fields the stage sets on a hit in Answer (Cache, Source, Reply,
	// Answer). The bytes are those the general path sends for the same
	// query, but for the TTLs' countdown.
	AnswerWire(dst []byte, q WireQuery, ev *Event, before []Passer) ([]byte, bool)
}

// WireForm is how the server would send answers to one plain UDP query,
// handed down the chain in Request.Wire, so that a stage that answers from
// stored state can keep the bytes with it for the wire shortcut.
type WireForm interface {
	// Shape is the query's shape (WireQuery.Shape); false when the
	// shortcut would not answer a query like it (not one it reads, or a
	// size limit other than its shape's).
	Shape() (uint8, bool)
	// Pack is the answer the server would send this query's client for m
	// as the chain returned it, without changing the query's event; false
	// when that answer is not one to keep (it had to be truncated, or does
	// not encode). The result is the caller's.
	Pack(m *dns.Msg) ([]byte, bool)
}
