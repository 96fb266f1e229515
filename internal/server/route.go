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
type route struct{ router Router }

func (rt route) Answer(ctx context.Context, r *query.Request) (*dns.Msg, error) {
	res, source := rt.router.Route(r.Msg.Question[0].Name)
	r.Event.Source = source
	if res == nil { // a Router bug: SERVFAIL (EDE Other), blaming no upstream
		return nil, errNoResolver
	}
	// The pool gives each client a share of its slots (docs/upstream-pool.md).
	out, err := res.Exchange(upstream.WithClient(ctx, r.Event.Client), r.Msg)
	r.Event.Upstream, r.Event.Tried = out.Upstream, out.Tried
	return out.Msg, err
}
