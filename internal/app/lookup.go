package app

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// lookupHost resolves a filter list URL's host through the chain below the
// filter, as nxdns answers its clients (docs/filter.md "Downloads"): the
// local answers first (local.records, localhost, the private and
// special-use names), then the current generation's route (a forward zone
// or the upstream pool). It never goes through nxdns's own listeners, so a
// list download cannot loop through the filter it feeds, nor through the
// system resolver. Special-use names are answered locally even with
// local.forward_private (listLocal): a list host is never sent to the pool
// as one. The filter's dialer answers localhost and IP literals itself
// before asking this.
func (a *App) lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	g := a.gen.Load()
	if g == nil {
		return nil, fmt.Errorf("not started")
	}
	route := query.HandlerFunc(func(ctx context.Context, r *query.Request) (*dns.Msg, error) {
		res, _ := g.Route(r.Msg.Question[0].Name)
		out, err := res.Exchange(ctx, r.Msg)
		return out.Msg, err
	})
	var addrs []netip.Addr
	var last error
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		q := new(dns.Msg).SetQuestion(dns.Fqdn(host), qtype)
		resp, err := g.listLocal.Answer(ctx, &query.Request{Msg: q, Event: &query.Event{}}, route)
		if err != nil {
			last = err
			continue
		}
		if resp.Rcode != dns.RcodeSuccess {
			last = fmt.Errorf("%s: %s", host, dns.RcodeToString[resp.Rcode])
			continue
		}
		for _, rr := range resp.Answer {
			switch v := rr.(type) {
			case *dns.A:
				if ip, ok := netip.AddrFromSlice(v.A.To4()); ok {
					addrs = append(addrs, ip)
				}
			case *dns.AAAA:
				if ip, ok := netip.AddrFromSlice(v.AAAA); ok {
					addrs = append(addrs, ip)
				}
			}
		}
	}
	if len(addrs) == 0 && last != nil {
		return nil, last
	}
	return addrs, nil
}
