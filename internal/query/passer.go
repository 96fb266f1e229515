package query

// A Passer is a stage that can tell, without building an answer, that it
// would hand a query to the next link and return that link's answer
// unchanged. The server answers a plain UDP cache hit straight from its
// wire form (docs/performance.md#answer-cache) only when every stage
// before the cache is a Passer and says so; a stage that is not a Passer
// there turns that fast path off, so a new stage is never skipped by
// accident.
//
// Passes sees the event as the stage would (Client, ClientName, Name,
// Qtype, Qclass) and the CNAME targets of the answer the cache holds, in
// the answer's order (read-only; nil for none), for a stage that checks an
// answer's names: the targets are all a stage has ever needed of it, and
// the cache keeps them beside the entry's hot fields, where a hit reads
// them without the message. It must agree with the stage's Answer.
type Passer interface {
	Stage
	Passes(ev *Event, cnames []string) bool
}

// A Pooler is a stage that decides which upstream pool a query goes to:
// a group's own upstreams (docs/filter.md "Per-group upstreams"). Its
// Answer sets Event.Pool before passing the query on; PoolOf names the
// same pool from the event's Client, ClientName and Time alone, so the
// server's UDP fast path can set Event.Pool before the cache looks the
// answer up: the cache keys answers by pool, and one pool's answer must
// never reach a query of another.
type Pooler interface {
	PoolOf(ev *Event) string
}
