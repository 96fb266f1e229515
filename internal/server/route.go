package server

import (
	"context"
	"errors"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/upstream"
)

// errNoResolver carries no Kind, so Classify files it under LocalResource.
var errNoResolver = errors.New("router returned no resolver")

// route is the last link of the chain (docs/design.md#stage-chain "route"): the forward zone
// with the longest matching suffix, otherwise the upstream pool. It records
// who was asked on the event, as the resolver's Result says: the source,
// the attributed upstream and every upstream tried.
type route struct {
	router Router
	guard  AnswerGuard // nil: no rebinding protection
}

func (rt route) Answer(ctx context.Context, r *query.Request) (*dns.Msg, error) {
	res, source := rt.resolver(r)
	r.Event.Source = source
	if res == nil { // a Router bug: SERVFAIL (EDE Other), blaming no upstream
		return nil, errNoResolver
	}
	// The pool gives each client a share of its slots (docs/upstream-pool.md).
	out, err := res.Exchange(upstream.WithClient(ctx, r.Event.Client), r.Msg)
	r.Event.Upstream, r.Event.Tried = out.Upstream, out.Tried
	if err == nil && rt.guard != nil && source == query.SourcePool {
		// The upstream stays attributed: it sent the answer refused.
		if refusal, refused := rt.guard.Check(r.Msg, out.Msg); refused {
			r.Event.Source = query.SourceRebinding
			return refusal, nil
		}
	}
	return out.Msg, err
}

// resolver is the Router's choice for r: in its group's pool when
// Event.Pool names one and the Router has per-group pools.
func (rt route) resolver(r *query.Request) (Resolver, string) {
	if r.Event.Pool != "" {
		if pr, ok := rt.router.(PoolRouter); ok {
			return pr.RouteIn(r.Msg.Question[0].Name, r.Event.Pool)
		}
	}
	return rt.router.Route(r.Msg.Question[0].Name)
}
