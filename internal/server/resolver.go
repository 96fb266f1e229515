package server

import (
	"context"
	"net/netip"

	"github.com/miekg/dns"
)

// Resolver answers one query on behalf of the handler. The upstream pool and
// each forward zone implement it, so the handler never knows which one it
// talks to.
//
// Resolve returns an answer to q before ctx ends, or an error whose Kind
// (upstream.Classify) decides the client's answer (SPEC §4.6); a
// *upstream.QueryError carries the upstreams tried and the budget. upstream
// names the attributed upstream or resolver, redacted, or "" for none
// (SPEC §4.4: never a fake identity). Resolve does not modify q.
type Resolver interface {
	Resolve(ctx context.Context, q *dns.Msg) (resp *dns.Msg, upstream string, err error)
}

// triedResolver is a Resolver that also reports every upstream it tried, in
// order, whatever the outcome (the pool, after a failover): the event then
// lists them on an answer too, not only on a failure's QueryError.
type triedResolver interface {
	ResolveTried(ctx context.Context, q *dns.Msg) (resp *dns.Msg, upstream string, tried []string, err error)
}

// Names gives a client's display name for the query log: a static name from
// the configuration or one learned by PTR lookup, "" when none is known. It
// must return at once; learning happens elsewhere, off the query's path.
type Names interface {
	Name(client netip.Addr) string
}
