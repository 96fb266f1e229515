package filter

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/query"
)

// The query path of the household switches (docs/filter.md "Blocked
// services", "Safe search"). A list's allow rule wins over a blocked
// service, as it wins over every block rule; a list's block rule decides
// before a service, so the log names the list; a blocked service wins over
// safe search (YouTube blocked and YouTube restricted: blocked).

// ServiceListPrefix starts the list name the query log, the history and
// the metrics give a blocked service ("service:tiktok"), and SafeSearchList
// is the one of a safe-search rewrite: the history keeps list, rule and
// group, so a service or a rewrite reads back from it too.
const (
	ServiceListPrefix = "service:"
	SafeSearchList    = "safe-search"
)

// decide is the verdict on name for the client: its lists, then the
// services of its groups.
func (c *check) decide(name string) verdict {
	v := c.set.decide(name, c.mask)
	if v.blocked || v.allowed || !c.swNeeded {
		return v
	}
	// Most names have no suffix a switch could know: they cost one walk
	// over their labels, and the client's switches are not worked out.
	x := index()
	var maybe bool
	if v.hash, maybe = x.mayHave(name); !maybe {
		return v
	}
	sw := c.switches()
	if sw.services.empty() {
		return v
	}
	if i, d := x.match(name, sw.services); i >= 0 {
		return verdict{blocked: true, service: i + 1, domain: d, hash: v.hash}
	}
	return v
}

// switches are the client's switches now, worked out once per check.
func (c *check) switches() switches {
	if !c.swDone {
		c.sw, c.swDone = c.p.switchesFor(c.ev.Client, c.ev.ClientName, c.ev.NewDevice, c.now, c.ov), true
	}
	return c.sw
}

// safeRewrite is a name answered as a CNAME to an engine's safe endpoint.
type safeRewrite struct {
	engine, target string
}

// rewrite is the safe-search rewrite of name for the client, if one of its
// groups forces the engine that name belongs to.
func (c *check) rewrite(name string, v verdict) (safeRewrite, bool) {
	if !c.swNeeded || v.blocked || v.hash != 0 && !index().maybe.has(v.hash) {
		return safeRewrite{}, false
	}
	rw, ok := index().rewrite(name, v.hash)
	if !ok {
		return safeRewrite{}, false
	}
	sw := c.switches()
	if sw.safe&engineBit(rw.Engine) == 0 {
		return safeRewrite{}, false
	}
	target := rw.Target
	if rw.ModerateTarget != "" && !sw.strict {
		target = rw.ModerateTarget
	}
	return safeRewrite{engine: rw.Engine, target: target}, true
}

// blockService answers a query for a blocked service's name as a list's
// block is answered, with EDE 15 "service NAME", and records the decision
// ("blocked service: TikTok (group kids)" in the log).
func (s *Stage) blockService(r *query.Request, v verdict, c check) *dns.Msg {
	i := v.service - 1
	svc := index().cat.Services[i]
	group := s.policy.groupOfService(c.ev.Client, c.ev.ClientName, c.ev.NewDevice, c.now, c.ov, i)
	r.Event.Source = query.SourceBlocked
	r.Event.Filter = query.Decision{Blocked: true, List: ServiceListPrefix + svc.ID, Rule: "||" + v.domain + "^",
		Group: group, Service: svc.Name}
	s.e.servicesBlocked[i].Add(1)
	return s.blockAnswer(r, "service "+svc.Name)
}

// safeSearch answers name as a CNAME to the engine's safe endpoint
// followed by the endpoint's own answer, which the rest of the chain gives
// (the cache, then the route): the endpoint's addresses are whatever the
// upstreams say today, and cached under the endpoint's name for every
// client. The CNAME's TTL is filter.block_ttl, so a schedule that ends
// reaches the client as soon as a blocked name's would.
func (s *Stage) safeSearch(ctx context.Context, r *query.Request, next query.Handler, rw safeRewrite, c check) (*dns.Msg, error) {
	q := r.Msg.Question[0]
	group := s.policy.groupOfEngine(c.ev.Client, c.ev.ClientName, c.ev.NewDevice, c.now, c.ov, rw.engine)
	r.Event.Filter = query.Decision{List: SafeSearchList, Rule: rw.engine + " → " + rw.target, Group: group, SafeSearch: rw.engine}
	if i := slices.Index(catalog.Engines, rw.engine); i >= 0 {
		s.e.safeSearched[i].Add(1)
	}
	m := r.Msg.Copy()
	m.Question[0].Name = dns.Fqdn(rw.target)
	// The server's packing is for the client's own question: the cache
	// keeps the target's wire form only for a query of the target itself.
	resp, err := next.Answer(ctx, &query.Request{Msg: m, Deadline: r.Deadline, Event: r.Event})
	if err != nil || resp == nil {
		return resp, err
	}
	out := new(dns.Msg)
	out.SetReply(r.Msg)
	out.Rcode, out.RecursionAvailable = resp.Rcode, resp.RecursionAvailable
	out.Answer = make([]dns.RR, 0, len(resp.Answer)+1)
	out.Answer = append(out.Answer, &dns.CNAME{
		Hdr:    dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: s.ttl},
		Target: dns.Fqdn(rw.target),
	})
	out.Answer = append(out.Answer, resp.Answer...)
	out.Ns = append([]dns.RR(nil), resp.Ns...)
	out.Extra = append([]dns.RR(nil), resp.Extra...)
	return out, nil
}

// checkSwitches completes the check endpoint's decision d with the
// client's services and safe search when no list decided; it reports
// whether they did.
func (s *Stage) checkSwitches(d *Decision, name string, client netip.Addr, clientName string, now time.Time) bool {
	ov := s.e.overrides.load()
	if !s.switchesOn && len(ov) == 0 {
		return false
	}
	c := check{set: s.e.set.Load(), ev: &query.Event{Client: client, ClientName: clientName}, now: now, p: s.policy, ov: ov, swNeeded: true}
	c.mask, _ = s.policy.Lists(client, clientName, now)
	v := c.decide(name)
	if v.service > 0 {
		i := v.service - 1
		svc := index().cat.Services[i]
		d.Group = s.policy.groupOfService(client, clientName, false, now, ov, i)
		d.Blocked, d.Service, d.ServiceID = !d.Paused, svc.Name, svc.ID
		d.List, d.Rule = ServiceListPrefix+svc.ID, "||"+v.domain+"^"
		if d.Paused {
			d.Explanation = fmt.Sprintf("would be blocked service: %s (group %s), but filtering is paused until %s", svc.Name, d.Group, d.PausedUntil.Format(time.RFC3339))
		} else {
			d.Explanation = fmt.Sprintf("blocked service: %s (group %s), by its domain %s", svc.Name, d.Group, v.domain)
		}
		return true
	}
	if rw, ok := c.rewrite(name, v); ok {
		d.Group = s.policy.groupOfEngine(client, clientName, false, now, ov, rw.engine)
		d.SafeSearch, d.Target = rw.engine, rw.target
		if d.Paused {
			d.Explanation = fmt.Sprintf("would be safe search: %s (group %s), answered as a CNAME to %s, but filtering is paused until %s", rw.engine, d.Group, rw.target, d.PausedUntil.Format(time.RFC3339))
		} else {
			d.Explanation = fmt.Sprintf("safe search: %s (group %s): answered as a CNAME to %s", rw.engine, d.Group, rw.target)
		}
		return true
	}
	return false
}
