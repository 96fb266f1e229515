package app

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/miekg/dns"
)

// lookupHost resolves a filter list URL's host the way nxdns resolves for
// its clients after the filter: through the current generation's route (a
// forward zone or the upstream pool), never through nxdns's own listeners,
// so a list download cannot loop through the filter it feeds.
func (a *App) lookupHost(ctx context.Context, host string) ([]netip.Addr, error) {
	g := a.gen.Load()
	if g == nil {
		return nil, fmt.Errorf("not started")
	}
	var addrs []netip.Addr
	var last error
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		q := new(dns.Msg).SetQuestion(dns.Fqdn(host), qtype)
		res, _ := g.Route(q.Question[0].Name)
		resp, _, err := res.Resolve(ctx, q)
		if err != nil {
			last = err
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
