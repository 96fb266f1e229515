package query

import "github.com/miekg/dns"

// A Passer is a stage that can tell, without building an answer, that it
// would hand a query to the next link and return that link's answer
// unchanged. The server answers a plain UDP cache hit straight from its
// wire form (docs/performance.md "Answer cache") only when every stage
// before the cache is a Passer and says so; a stage that is not a Passer
// there turns that fast path off, so a new stage is never skipped by
// accident.
//
// Passes sees the event as the stage would (Client, ClientName, Name,
// Qtype, Qclass) and the answer the cache holds (read-only), for a stage
// that checks an answer's names. It must agree with the stage's Answer.
type Passer interface {
	Stage
	Passes(ev *Event, cached *dns.Msg) bool
}
