// Package query is the vocabulary of the query path (docs/design.md#query-event): the one Event
// every query produces, the Request each stage sees, and the Stage and
// Handler seams that chain local answers, policy, the cache and the route
// into one short handler.
//
// It sits below every stage package and imports nothing internal, so a stage
// (internal/cache, internal/local, internal/filter) never imports the server,
// and the server never imports a stage: the composition root (internal/app)
// puts the chain together.
package query

import (
	"context"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// Request is one query as the stages see it.
type Request struct {
	// Msg is the query as nxdns sends it on: its own random ID, RD set, the
	// client's question (case kept), CD and AD, and nxdns's own OPT record
	// carrying only the client's DO bit. Stages never modify it: copy it
	// (Msg.Copy) to send something else. An exchange may still be packing
	// it after the stage that started it returned (the cache's prefetch and
	// its exchange past a stale point run on), and packing rewrites the OPT
	// record's TTL field (upstream.Client): once next.Answer has returned,
	// a stage reads only Msg's header and question, never its OPT.
	Msg *dns.Msg
	// Deadline is when the client's answer is due: the query's arrival plus
	// the pool's total budget. A stage that waits (the cache's stale point,
	// docs/design.md#serve-stale) spends it like everything else (docs/design.md#lesson-deadline).
	Deadline time.Time
	// Event is the query's record; each stage fills the fields it decides.
	Event *Event
	// Wire, when set, packs answers as the server would send them to this
	// query's client: the cache keeps the bytes with an entry, for the UDP
	// wire shortcut (wire.go). nil but for plain UDP queries.
	Wire WireForm
	// Lasting says the ctx the query is answered under ends only when the
	// server stops serving (a UDP query: nothing tells nxdns that its client
	// left), so every query that could share work with it ends no later. A
	// stage may then run work other queries wait for on this query's own
	// goroutine (the cache's exchange, docs/cache.md "Coalescing"), saving the
	// hand-off to a goroutine of its own.
	Lasting bool
}

// Handler answers a Request: the rest of the chain, as a stage sees it.
//
// Answer returns an answer as an upstream would give it — the handler
// restores the client's ID and question, sizes it and replaces its OPT
// record, keeping only its Extended DNS Errors — or an error whose
// upstream.Kind decides the client's SERVFAIL and its EDE (docs/design.md#pool-answers). An
// error without a Kind is filed as a local resource problem, blaming no
// upstream. Answer returns by the time ctx ends. Neither the handler nor
// any later stage modifies the returned message or its records, so a stage
// may return a message it shares (a cache entry) as long as it is never
// modified afterwards.
type Handler interface {
	Answer(ctx context.Context, r *Request) (*dns.Msg, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, r *Request) (*dns.Msg, error)

// Answer calls f.
func (f HandlerFunc) Answer(ctx context.Context, r *Request) (*dns.Msg, error) { return f(ctx, r) }

// Stage is one link of the chain. It answers the query itself (a local
// record, a blocked name, a cache hit) or passes it on with next.Answer, and
// may look at what came back (the cache stores it, the filter checks its
// CNAME chain). A stage keeps to its own state: what it learned about the
// query goes into r.Event, never into another stage.
type Stage interface {
	Answer(ctx context.Context, r *Request, next Handler) (*dns.Msg, error)
}

// Chain returns the Handler that runs stages in order and then last. The
// chain is built once per configuration, not per query.
func Chain(last Handler, stages ...Stage) Handler {
	h := last
	for i := len(stages) - 1; i >= 0; i-- {
		h = link{stage: stages[i], next: h}
	}
	return h
}

type link struct {
	stage Stage
	next  Handler
}

func (l link) Answer(ctx context.Context, r *Request) (*dns.Msg, error) {
	return l.stage.Answer(ctx, r, l.next)
}

// Sink consumes finished events: the history store, and anything else that
// wants every query (the query log and the counters are the server's own).
// Record is called once per query, after the answer was written or dropped,
// on the query's goroutine: it must return at once (buffer, never block on
// I/O). The Event is final when handed over and is never changed again:
// every query has its own, so a sink may keep it — unless every sink is an
// EventCopier.
type Sink interface {
	Record(e *Event)
}

// An EventCopier is a Sink that keeps nothing of an Event past Record: it
// copies what it keeps (the history store encodes a row). When every sink
// is one, the server's UDP fast path records its cache hits from one Event
// per socket reader, overwritten by the reader's next hit, instead of
// allocating one per hit: at cache-hit rates that allocation was what made
// the garbage collector run (docs/performance.md#work-per-query,
// re-measured by scripts/workperquery.sh). The general path likewise
// allocates a query's Event and its Reply with the query's own state.
type EventCopier interface {
	Sink
	CopiesEvents()
}

// Proto is the transport a query arrived on.
type Proto uint8

// The transports, as the query log and metrics name them.
const (
	UDP Proto = iota + 1
	TCP
	DoT  // RFC 7858, on tls.dot_listen (docs/design.md#tls-serving)
	DoH  // RFC 8484, on tls.doh_listen
	DoQ  // RFC 9250, on tls.doq_listen (docs/server.md "DNS over QUIC")
	DoH3 // RFC 8484 over HTTP/3 (RFC 9114), on tls.doh3_listen (docs/server.md "DoH over HTTP/3")
)

var protoNames = [...]string{UDP: "udp", TCP: "tcp", DoT: "dot", DoH: "doh", DoQ: "doq", DoH3: "h3"}

func (p Proto) String() string {
	if int(p) < len(protoNames) && protoNames[p] != "" {
		return protoNames[p]
	}
	return "unknown"
}

// Stream reports whether p is a stream transport: answers up to 65535
// bytes, and TC means nothing on it (docs/design.md#response-validation).
func (p Proto) Stream() bool { return p != UDP }

// Sources name who answered, for the query log, the counters and the
// history (docs/design.md#metrics counts queries by source). A forward zone's source is
// ZonePrefix plus the zone's name without its trailing dot ("zone:lan").
const (
	SourcePool    = "pool"    // the upstream pool
	SourceCache   = "cache"   // a fresh cache entry
	SourceStale   = "stale"   // an expired cache entry, served with EDE 3
	SourceLocal   = "local"   // local records, special and private names
	SourceBlocked = "blocked" // the filter's answer for a blocked name
	SourceRefused = "refused" // the client is outside dns.allow
	SourceServer  = "server"  // FORMERR, NOTIMP, BADVERS: the query itself was the problem
	// SourceRebinding is a pool's answer refused by rebinding protection
	// (docs/protocol.md "Rebinding protection"): it pointed a public name
	// at an internal address. Never cached.
	SourceRebinding = "rebinding"
	// SourceRateLimited is a query refused by the per-device rate limit
	// (docs/protocol.md "Rate limit").
	SourceRateLimited = "ratelimited"
	ZonePrefix        = "zone:"
)

// RcodeNone is Event.Rcode when no answer was sent (a cancelled query).
const RcodeNone = -1

// Event is the one record of one query (docs/design.md#query-event). The server creates it when
// the query arrives, the stages fill in what they decide, the server
// completes it when the answer is packed, and every consumer — the query
// log, the counters, the history — reads this one value, so they never
// disagree. Each field says who writes it; docs/architecture.md "Who
// writes which event field" has the whole table.
type Event struct {
	Time       time.Time  // arrival; the server's
	Client     netip.Addr // the client's address (the TCP peer for streams); the server's
	ClientName string     // static or learned name; "" when none is known; the server's, once the query passes dns.allow
	Proto      Proto      // the server's

	// The device behind the query (docs/devices.md). ClientMAC is its MAC
	// ("aa:bb:cc:dd:ee:ff"; "" when none is known): a trusted forwarder's
	// EDNS0 option 65001 (the server's), else the neighbour table's (the
	// device view's, with ClientName). ClientID is the name a DoT or DoH
	// client gave itself (the server's; validated). Via is the trusted
	// forwarder the query came through when Client was taken from its
	// client-subnet option; the zero Addr otherwise (the server's).
	// NewDevice is set for a device seen for the first time and not yet
	// acknowledged (the device view's): the filter puts it in the
	// new_devices group.
	ClientMAC string
	ClientID  string
	Via       netip.Addr
	NewDevice bool

	// The question as the client asked it; Name is "" when none parsed.
	// The server's (on a UDP fast hit the cache sets Name: the entry's
	// copy of the same lower-case name).
	Name   string
	Qtype  uint16
	Qclass uint16

	Source   string   // one of the Source constants, or ZonePrefix+zone: set by whoever answered (the server, a stage, the route)
	Upstream string   // the attributed upstream or zone resolver, redacted; "" for none (never invented); the route's (the cache relays its exchange's)
	Tried    []string // every upstream tried, in order, redacted; nil when none was; the route's (the cache relays its exchange's)
	Cache    string   // the cache's outcome (CacheHit …); "" when the cache was not consulted; the cache stage's
	Filter   Decision // the policy stage's decision; zero when it did not block; the filter's
	// Pool is the group whose own upstream pool answers the query
	// (docs/filter.md "Per-group upstreams"); "" for the main pool. The
	// policy stage's (a Pooler's), read by the cache's key and the route.
	Pool string

	Resolved bool          // the query passed access control and went down the chain; the server's
	Rcode    int           // of the answer sent; RcodeNone when nothing was sent; the server's
	EDE      *EDE          // the Extended DNS Error sent, ours or relayed; nil for none; the server's
	Reply    *dns.Msg      // the answer as sent (read-only); nil when nothing was sent; the server's (the cache's on a UDP fast hit)
	Answer   string        // Summary(Reply), set when the event is recorded, so no sink summarises it again; the server's (the cache's on a UDP fast hit)
	Duration time.Duration // from arrival to the answer packed; the server's
}

// Cache outcomes (Event.Cache).
const (
	CacheHit       = "hit"       // answered from a fresh entry
	CacheMiss      = "miss"      // passed on to the route
	CacheStale     = "stale"     // answered from an expired entry (EDE 3)
	CacheCoalesced = "coalesced" // shared another query's exchange in flight
)

// Decision is what the policy stage decided about a blocked query.
type Decision struct {
	Blocked bool
	List    string // the configured list name, or "inline"
	Rule    string // the rule as written in the list
	Group   string // the client's group
	// Service is the blocked service's name ("TikTok") when a group's
	// services blocked; SafeSearch the engine ("google") when a group's
	// safe search answered the name as a CNAME to the engine's safe
	// endpoint (Blocked is then false: the answer is the endpoint's).
	Service    string
	SafeSearch string
}

// EDE is an Extended DNS Error (RFC 8914) as sent to the client.
type EDE struct {
	Code uint16
	Text string
}
