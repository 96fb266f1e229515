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

// route is the last link of the chain (SPEC §2 "route"): the forward zone
// with the longest matching suffix, otherwise the upstream pool. It records
// who was asked on the event: the source, the attributed upstream and every
// upstream tried.
type route struct{ router Router }

func (rt route) Answer(ctx context.Context, r *query.Request) (*dns.Msg, error) {
	res, source := rt.router.Route(r.Msg.Question[0].Name)
	r.Event.Source = source
	if res == nil { // a Router bug: SERVFAIL (EDE Other), blaming no upstream
		return nil, errNoResolver
	}
	// The pool gives each client a share of its slots (docs/upstream-pool.md).
	ctx = upstream.WithClient(ctx, r.Event.Client)
	if tr, ok := res.(triedResolver); ok {
		resp, up, tried, err := tr.ResolveTried(ctx, r.Msg)
		r.Event.Upstream, r.Event.Tried = up, tried
		if qe, ok := errors.AsType[*upstream.QueryError](err); ok && up == "" {
			r.Event.Upstream = qe.Attributed
		}
		return resp, err
	}
	resp, up, err := res.Resolve(ctx, r.Msg)
	r.Event.Upstream = up
	if qe, ok := errors.AsType[*upstream.QueryError](err); ok {
		r.Event.Tried = qe.Tried
		if up == "" {
			r.Event.Upstream = qe.Attributed
		}
	} else if up != "" {
		r.Event.Tried = []string{up}
	}
	return resp, err
}
