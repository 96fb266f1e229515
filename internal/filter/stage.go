package filter

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// Stage is the policy link of one configuration generation: its Policy and
// answer settings, over the Engine's long-lived set and pauses.
type Stage struct {
	e        *Engine
	policy   *Policy
	bits     map[string]int
	names    [MaxLists]string // list bit → name
	response string
	ttl      uint32
	// switchesOn: some group has a service or a safe-search engine in the
	// configuration (the dashboard's overrides are looked at regardless).
	switchesOn bool
}

// NewStage builds the stage for cfg; loc is the schedules' time zone (nil:
// the host's).
func (e *Engine) NewStage(cfg config.Config, loc *time.Location) *Stage {
	bits := e.Bits(cfg.Filter.Lists)
	s := &Stage{
		e:        e,
		policy:   NewPolicy(cfg.Filter, cfg.Clients, bits, loc).withNewDevices(cfg.Devices.NewDevices),
		bits:     bits,
		response: cfg.Filter.BlockResponse,
		ttl:      uint32(cfg.Filter.BlockTTL),
	}
	s.switchesOn = s.policy.anySwitches()
	for name, b := range bits {
		s.names[b] = name
	}
	s.names[inlineBit] = InlineList
	return s
}

// Decision is the explanation of what the filter does with a name for a
// client (the check endpoint's answer, and the query event's).
type Decision struct {
	Name        string    `json:"name"`
	Client      string    `json:"client,omitempty"`
	Group       string    `json:"group,omitempty"`
	Blocked     bool      `json:"blocked"`
	Allowlisted bool      `json:"allowlisted"` // an allow rule or an exception decided
	List        string    `json:"list,omitempty"`
	Rule        string    `json:"rule,omitempty"`
	Paused      bool      `json:"paused"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
	// FromDashboard: the name (or a parent, Rule) was allowed at run time
	// with POST /api/filter/allow; List is then DashboardList.
	FromDashboard bool `json:"allowed_from_dashboard"`
	// Pool is the group whose own upstreams the client's queries go to
	// now (Policy.Pool); "" for the main pool.
	Pool string `json:"pool,omitempty"`
	// Service is the blocked service that decided (its catalogue id in
	// ServiceID), SafeSearch the engine whose safe search rewrote the name
	// to Target (docs/filter.md "Blocked services", "Safe search").
	Service    string `json:"service,omitempty"`
	ServiceID  string `json:"service_id,omitempty"`
	SafeSearch string `json:"safe_search,omitempty"`
	Target     string `json:"safe_search_target,omitempty"`
	// Explanation says the decision in words, for the dashboard.
	Explanation string `json:"explanation"`
}

// Check decides name for a client at now, as a query would be.
func (s *Stage) Check(name string, client netip.Addr, clientName string, now time.Time) Decision {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	d := Decision{Name: name}
	if client.IsValid() {
		d.Client = client.String()
	}
	mask, group := s.policy.Lists(client, clientName, now)
	d.Group = group
	d.Pool = s.policy.Pool(client, clientName, now) // pools.go
	if until, ok := s.paused(client, clientName, now); ok {
		d.Paused, d.PausedUntil = true, until
	}
	if m, ok := s.e.allow.match(name); ok {
		d.Allowlisted, d.FromDashboard, d.List, d.Rule = true, true, DashboardList, "||"+m+"^"
		d.Explanation = "allowed from the dashboard (" + m + " and every name below it)"
		return d
	}
	if m, ok := s.e.block.match(name); ok {
		d.List, d.Rule, d.Blocked = DashboardList, "||"+m+"^", !d.Paused
		d.Explanation = "blocked from the dashboard (" + m + " and every name below it)"
		if d.Paused {
			d.Explanation = "would be blocked from the dashboard (" + m + "), but filtering is paused until " + d.PausedUntil.Format(time.RFC3339)
		}
		return d
	}
	v := s.e.set.Load().decide(name, mask)
	if v.blocked || v.allowed {
		d.List, d.Rule = s.names[v.why.list], v.why.ruleText()
		d.Group = s.policy.GroupOf(client, clientName, now, v.why.list)
	}
	d.Blocked, d.Allowlisted = v.blocked && !d.Paused, v.allowed
	if !v.blocked && !v.allowed && s.checkSwitches(&d, name, client, clientName, now) {
		return d
	}
	switch {
	case v.blocked && d.Paused:
		d.Explanation = fmt.Sprintf("would be blocked by list %s rule %s%s, but filtering is paused until %s", d.List, d.Rule, ofGroup(d.Group), d.PausedUntil.Format(time.RFC3339))
	case v.blocked:
		d.Explanation = fmt.Sprintf("blocked by list %s rule %s%s", d.List, d.Rule, ofGroup(d.Group))
	case v.allowed:
		d.Explanation = fmt.Sprintf("allowed by list %s rule %s%s", d.List, d.Rule, ofGroup(d.Group))
	default:
		d.Explanation = "not blocked: no rule of this client's lists matches"
	}
	return d
}

// ofGroup is the explanation's mention of the group whose list decided.
func ofGroup(g string) string {
	if g == "" {
		return ""
	}
	return " of group " + g
}

// Answer blocks a blocked name without forwarding it, passes everything
// else on, and blocks an answer whose CNAME chain reaches a blocked name
// (CNAME cloaking: a tracker hidden behind the site's own name).
func (s *Stage) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	r.Event.Pool = s.PoolOf(r.Event) // pools.go
	if len(r.Msg.Question) != 1 || r.Msg.Question[0].Qclass != dns.ClassINET {
		return next.Answer(ctx, r)
	}
	name := normal(r.Msg.Question[0].Name)
	c, ok := s.checks(r.Event, name)
	if !ok {
		return next.Answer(ctx, r)
	}
	if m, ok := s.e.block.match(name); ok {
		return s.blockAs(r, DashboardList, "||"+m+"^", ""), nil
	}
	v := c.decide(name)
	if v.blocked {
		return s.block(r, v, c), nil
	}
	if rw, ok := c.rewrite(name, v); ok {
		return s.safeSearch(ctx, r, next, rw, c)
	}
	resp, err := next.Answer(ctx, r)
	if err != nil || resp == nil {
		return resp, err
	}
	if v := c.cloaked(resp); v.blocked {
		return s.block(r, v, c), nil
	}
	return resp, nil
}

// Passes reports whether the stage would hand the query of ev on and let
// the cached answer through: the name and every one of the answer's CNAME
// targets (cnames) are not blocked for the client now (query.Passer, for
// the server's fast path).
func (s *Stage) Passes(ev *query.Event, cnames []string) bool {
	if ev.Qclass != dns.ClassINET {
		return true
	}
	name := normal(ev.Name)
	c, ok := s.checks(ev, name)
	if !ok {
		return true
	}
	if _, ok := s.e.block.match(name); ok {
		return false
	}
	if v := c.decide(name); v.blocked {
		return false
	} else if _, rewritten := c.rewrite(name, v); rewritten {
		return false // answered by the safe-search rewrite, never from another client's entry
	}
	for _, target := range cnames {
		if c.target(target).blocked {
			return false
		}
	}
	return true
}

// check is what a query's names are checked against: the rule set and the
// lists of the client's groups at this moment, and the client and moment
// themselves, to name the group of the list that blocks (Policy.GroupOf).
type check struct {
	set  *Set
	mask uint64
	ev   *query.Event
	now  time.Time
	ov   overrideMap // the dashboard's switch overrides, to name a group
	// sw is the services and safe search of the client's groups now,
	// worked out (by p) only for a name that may have a switch:
	// swNeeded says some group has one, swDone that sw holds them.
	p                *Policy
	sw               switches
	swNeeded, swDone bool
}

// checks returns the client's check for a query of name (as normal gives
// it), or false when nothing is to be checked: filtering is paused for the
// client, or the name was allowed from the dashboard (the operator asked
// for this name to work, whatever its lists and its CNAME chain say).
func (s *Stage) checks(ev *query.Event, name string) (check, bool) {
	now := s.e.timeOf(ev)
	if _, paused := s.paused(ev.Client, ev.ClientName, now); paused {
		return check{}, false
	}
	if _, ok := s.e.allow.match(name); ok {
		return check{}, false
	}
	mask, _ := s.policy.listsFor(ev, now)
	c := check{set: s.e.set.Load(), mask: mask, ev: ev, now: now, p: s.policy}
	c.ov = s.e.overrides.load()
	c.swNeeded = s.switchesOn || len(c.ov) > 0
	return c, true
}

// paused reports whether filtering is paused for a client at now: for
// everyone, for the client, or for a group it belongs to (Policy.Member).
func (s *Stage) paused(client netip.Addr, name string, now time.Time) (time.Time, bool) {
	if until, ok := s.e.pauses.paused(client, name, now); ok {
		return until, true
	}
	g := s.e.pauses.groups.Load()
	if g == nil || len(*g) == 0 {
		return time.Time{}, false
	}
	for group, until := range *g {
		if now.Before(until) && s.policy.Member(group, client, name) {
			return until, true
		}
	}
	return time.Time{}, false
}

// cloaked is the verdict on an answer's CNAME targets (CNAME cloaking: a
// tracker behind a first-party name).
func (c *check) cloaked(resp *dns.Msg) verdict {
	for _, rr := range resp.Answer {
		if t, ok := rr.(*dns.CNAME); ok {
			if v := c.target(t.Target); v.blocked {
				return v
			}
		}
	}
	return verdict{}
}

// target is the verdict on one CNAME target, as an answer spells it.
func (c *check) target(name string) verdict { return c.decide(normal(name)) }

// normal is a query name as the set compares it. A query name is almost
// always lower-case already, and then this allocates nothing.
func normal(name string) string {
	name = strings.TrimSuffix(name, ".")
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}

// block is the answer for a blocked query (filter.block_response) with EDE
// 15 naming the list and the rule, and the event's decision, which names
// the group whose list blocked (docs/filter.md).
func (s *Stage) block(r *query.Request, v verdict, c check) *dns.Msg {
	if v.service > 0 {
		return s.blockService(r, v, c)
	}
	list, rule := s.names[v.why.list], v.why.ruleText()
	group := s.policy.groupOfEvent(c.ev, c.now, v.why.list)
	s.e.blocked[v.why.list].Add(1)
	return s.blockAs(r, list, rule, group)
}

// blockAs is the blocked answer naming list, rule and group, and the
// event's decision.
func (s *Stage) blockAs(r *query.Request, list, rule, group string) *dns.Msg {
	r.Event.Source = query.SourceBlocked
	r.Event.Filter = query.Decision{Blocked: true, List: list, Rule: rule, Group: group}
	return s.blockAnswer(r, fmt.Sprintf("list %s rule %s", list, rule))
}

// blockAnswer is the answer for a blocked query (filter.block_response),
// with EDE 15 (Blocked) carrying text.
func (s *Stage) blockAnswer(r *query.Request, text string) *dns.Msg {
	q := r.Msg.Question[0]
	resp := new(dns.Msg)
	switch s.response {
	case config.ResponseRefused:
		resp.SetRcode(r.Msg, dns.RcodeRefused)
	case config.ResponseNXDomain:
		resp.SetRcode(r.Msg, dns.RcodeNameError)
		resp.Ns = append(resp.Ns, s.soa(q.Name))
	default: // null
		resp.SetReply(r.Msg)
		hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: s.ttl}
		switch q.Qtype {
		case dns.TypeA:
			resp.Answer = append(resp.Answer, &dns.A{Hdr: hdr, A: net.IPv4zero.To4()})
		case dns.TypeAAAA:
			resp.Answer = append(resp.Answer, &dns.AAAA{Hdr: hdr, AAAA: net.IPv6zero})
		default:
			resp.Ns = append(resp.Ns, s.soa(q.Name))
		}
	}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(dns.DefaultMsgSize)
	opt.Option = append(opt.Option, &dns.EDNS0_EDE{
		InfoCode:  dns.ExtendedErrorCodeBlocked,
		ExtraText: text,
	})
	resp.Extra = append(resp.Extra, opt)
	return resp
}

// soa makes a negative blocked answer cacheable for block_ttl (RFC 2308).
func (s *Stage) soa(name string) dns.RR {
	return &dns.SOA{
		Hdr:    dns.RR_Header{Name: dns.Fqdn(name), Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: s.ttl},
		Ns:     "blocked.nxdns.invalid.",
		Mbox:   "nobody.invalid.",
		Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400,
		Minttl: s.ttl,
	}
}

var _ query.Passer = (*Stage)(nil)

// Groups are the configured [[filter.groups]] names (for Home Assistant's
// switches, internal/mqtt).
func (s *Stage) Groups() []string { return s.policy.Groups() }
