package server

import (
	"context"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/upstream"
)

// Resolver answers one query on behalf of the route. The upstream pool and
// each forward zone implement it, so the handler never knows which one it
// talks to.
//
// Exchange returns before ctx ends. Its Result is the route's one account
// of who was asked — the attributed upstream or zone resolver (docs/design.md#pool-attribution:
// never a fake identity) and every upstream tried, on an answer as on a
// failure — and its error's Kind (upstream.Classify) decides the client's
// answer (docs/design.md#pool-answers); a *upstream.QueryError carries the budget and the
// last attempt's error. Exchange does not modify q.
type Resolver interface {
	Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error)
}

// Names gives a client's display name for the query log: a static name from
// the configuration or one learned by PTR lookup, "" when none is known. It
// must return at once; learning happens elsewhere, off the query's path.
type Names interface {
	Name(client netip.Addr) string
}
