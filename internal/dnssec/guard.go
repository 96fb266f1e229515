package dnssec

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/stats"
	"github.com/nxdns/nxdns/internal/upstream"
)

// Mode is [dnssec] mode (docs/dnssec.md).
type Mode string

const (
	// Off: answers pass as the upstream gave them, its AD bit included.
	Off Mode = "off"
	// Shadow: answers are given without waiting for validation, and so
	// without AD (AD means nxdns validated); each is validated afterwards,
	// and a bogus verdict logged and counted (shadow.go).
	Shadow Mode = "shadow"
	// Enforce: a bogus answer becomes SERVFAIL with its EDE, once the
	// system clock is set; until then, shadow.
	Enforce Mode = "enforce"
)

// Exchanger is the route's view of a resolver (server.Resolver).
type Exchanger interface {
	Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error)
}

// Stats are the verdicts counted across reloads, for /metrics and the
// dashboard. The zero Stats is ready.
type Stats struct {
	counts   [4]atomic.Uint64 // by Status
	enforced atomic.Uint64
	latency  stats.Histogram
	shadow   shadowQueue // shadow mode's validations, after the answer (shadow.go)

	mu     sync.Mutex
	recent []Episode // newest last, at most maxRecent
	logged map[string]time.Time
}

// Episode is a bogus verdict as the dashboard and the log show it.
type Episode struct {
	Time     time.Time `json:"time"`
	Name     string    `json:"name"`
	Zone     string    `json:"zone"`
	Reason   string    `json:"reason"`
	EDE      uint16    `json:"ede"`
	Enforced bool      `json:"enforced"` // answered SERVFAIL rather than passed on
}

const (
	maxRecent = 50
	// episodeGap: one log line per zone and reason for each run of bogus
	// verdicts not more than this far apart.
	episodeGap = 10 * time.Minute
)

// Snapshot is Stats at one instant.
type Snapshot struct {
	Secure, Insecure, Bogus, Indeterminate uint64
	Enforced                               uint64 // bogus answers turned into SERVFAIL
	Skipped                                uint64 // shadow validations not done: the queue was full
	Pending                                int    // shadow validations queued or running now
	Latency                                stats.HistogramSnapshot
	Recent                                 []Episode
}

func (s *Stats) Snapshot() Snapshot {
	s.mu.Lock()
	recent := append([]Episode{}, s.recent...) // never nil: the API answers [], not null
	s.mu.Unlock()
	return Snapshot{
		Secure: s.counts[Secure].Load(), Insecure: s.counts[Insecure].Load(),
		Bogus: s.counts[Bogus].Load(), Indeterminate: s.counts[Indeterminate].Load(),
		Enforced: s.enforced.Load(), Skipped: s.shadow.skipped.Load(), Pending: s.shadow.pending(),
		Latency: s.latency.Snapshot(), Recent: recent,
	}
}

// bogus records one bogus verdict and reports whether it starts an
// episode (and so deserves a log line).
func (s *Stats) bogus(e Episode) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.recent) == maxRecent {
		copy(s.recent, s.recent[1:])
		s.recent = s.recent[:maxRecent-1]
	}
	s.recent = append(s.recent, e)
	if s.logged == nil {
		s.logged = map[string]time.Time{}
	}
	key := e.Zone + "\x00" + e.Reason
	last, seen := s.logged[key]
	s.logged[key] = e.Time
	if len(s.logged) > 1000 {
		for k, t := range s.logged {
			if e.Time.Sub(t) > episodeGap {
				delete(s.logged, k)
			}
		}
	}
	return !seen || e.Time.Sub(last) > episodeGap
}

// Guard applies a mode to the answers of the resolvers it wraps.
type Guard struct {
	v        *Validator
	mode     Mode
	clockSet func() bool
	// clockConfirmed reports whether a time service vouches for the clock
	// (WithClockConfirmed); nil: clockSet is taken as confirmation.
	clockConfirmed func() bool
	log            *zap.Logger
	stats          *Stats
	budget         time.Duration

	// Shadow validations of this Guard's answers running now, and whether
	// Retire was called (shadow.go).
	jobsMu   sync.Mutex
	jobs     int
	retired  bool
	jobsIdle chan struct{} // closed when the last job ends after Retire
}

// NewGuard makes a Guard. clockSet reports whether the system clock has
// been set; enforce waits for it (docs/dnssec.md "The clock"). budget is
// the query's whole time: the exchange, and the DS and DNSKEY fetches its
// validation needs, end by it.
func NewGuard(v *Validator, mode Mode, clockSet func() bool, log *zap.Logger, st *Stats, budget time.Duration) *Guard {
	return &Guard{v: v, mode: mode, clockSet: clockSet, log: log, stats: st, budget: budget}
}

// Enforcing reports whether a bogus answer becomes SERVFAIL now.
func (g *Guard) Enforcing() bool { return g.mode == Enforce && g.clockSet() }

// WithClockConfirmed tells g how to know that a time service vouches for
// the clock, and returns g. A clock that is plausible but that no time
// service vouches for may be a Raspberry Pi's, restored at boot to the time
// it was shut down: behind, so a fresh signature reads as not yet valid.
// Refusing those answers would refuse the time servers' names too, and the
// clock would never be set (docs/dnssec.md "The clock"); so in enforce a
// verdict of "signature not yet valid" (EDE 8) is refused only with a
// confirmed clock, and passed on, logged and counted, without one.
func (g *Guard) WithClockConfirmed(f func() bool) *Guard {
	g.clockConfirmed = f
	return g
}

// enforces reports whether bogus verdict v becomes SERVFAIL now.
func (g *Guard) enforces(v Result) bool {
	if !g.Enforcing() {
		return false
	}
	if v.EDE == dns.ExtendedErrorCodeSignatureNotYetValid && g.clockConfirmed != nil && !g.clockConfirmed() {
		return false
	}
	return true
}

// Validator is the Guard's validator (for its negative trust anchors).
func (g *Guard) Validator() *Validator { return g.v }

// Wrap validates r's answers.
func (g *Guard) Wrap(r Exchanger) Exchanger { return guarded{g: g, next: r} }

// Unvalidated passes r's answers on without validating them and without
// the AD bit (a forward zone with validate = false): with validation on,
// AD means nxdns validated the answer, never that someone else says so.
func (g *Guard) Unvalidated(r Exchanger) Exchanger { return unvalidated{r} }

type unvalidated struct{ next Exchanger }

func (u unvalidated) Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error) {
	res, err := u.next.Exchange(ctx, q)
	res.Msg = withoutAD(res.Msg)
	return res, err
}

// withoutAD is m with AD clear, a copy when it was set.
func withoutAD(m *dns.Msg) *dns.Msg {
	if m == nil || !m.AuthenticatedData {
		return m
	}
	c := *m
	c.AuthenticatedData = false
	return &c
}

type guarded struct {
	g    *Guard
	next Exchanger
}

// Exchange asks the wrapped resolver with DO=1 (the signatures are needed
// whatever the client asked) and gives the answer back without the DNSSEC
// records a client without DO did not ask for (RFC 4035 §3.2.1). In
// enforce mode it validates the answer first and sets AD exactly when it
// is secure; with the clock set, a bogus answer is replaced by SERVFAIL
// carrying the verdict's EDE, its text naming the zone and the reason. In
// shadow mode the answer is returned at once, without AD, its validation
// queued (shadow.go). A query with CD=1 is not validated
// (RFC 4035 §3.2.2: the client checks for itself) and its answer never
// carries AD. q is not modified.
func (r guarded) Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error) {
	if q.CheckingDisabled {
		return unvalidated{r.next}.Exchange(ctx, q)
	}
	do := false
	if o := q.IsEdns0(); o != nil {
		do = o.Do()
	}
	up := q
	if !do {
		up = withDO(q)
	}
	if r.g.budget > 0 {
		var cancel context.CancelFunc
		// The pool's own budget starts a moment later, so with equal
		// budgets this one ends first, by microseconds; the pool files
		// either end as a spent budget (EDE 22).
		ctx, cancel = context.WithTimeoutCause(ctx, r.g.budget, upstream.KindBudgetExhausted)
		defer cancel()
	}
	res, err := r.next.Exchange(ctx, up)
	if err != nil || res.Msg == nil {
		return res, err
	}
	if r.g.mode == Shadow {
		// The answer leaves now, without AD (nothing is validated yet);
		// the verdict follows off the query's path (shadow.go).
		r.g.stats.shadow.submit(shadowJob{g: r.g, ctx: context.WithoutCancel(ctx), name: q.Question[0].Name, resp: res.Msg})
		res.Msg = clientView(res.Msg, q, do, false)
		return res, nil
	}
	start := time.Now()
	v := r.g.v.Validate(ctx, res.Msg)
	m := *clientView(res.Msg, q, do, v.Status == Secure)
	if !v.ValidUntil.IsZero() {
		left := uint32(max(time.Until(v.ValidUntil)/time.Second, 0))
		m.Answer, m.Ns = capTTL(m.Answer, left), capTTL(m.Ns, left)
	}
	res.Msg = &m
	if !r.g.record(start, q.Question[0].Name, v) {
		return res, nil
	}
	res.Msg = servfail(q, v)
	return res, nil
}

// clientView is the upstream's answer as the client gets it: a copy with
// AD as given, without the DNSSEC records a client without DO did not ask
// for (RFC 4035 §3.2.1). resp is not modified.
func clientView(resp, q *dns.Msg, do, ad bool) *dns.Msg {
	m := *resp
	m.AuthenticatedData = ad
	if !do {
		qt := q.Question[0].Qtype
		m.Answer = strip(m.Answer, qt)
		m.Ns = strip(m.Ns, qt)
		m.Extra = strip(m.Extra, qt)
	}
	return &m
}

// record counts verdict v on the answer for name, validation having begun
// at start, lists and logs it when bogus, and reports whether the answer
// is to be refused (enforce with the clock set).
func (g *Guard) record(start time.Time, name string, v Result) (enforced bool) {
	g.stats.latency.Observe(time.Since(start))
	g.stats.counts[v.Status].Add(1)
	if v.Status != Bogus {
		return false
	}
	enforced = g.enforces(v)
	e := Episode{Time: start, Name: name, Zone: v.Zone, Reason: v.Reason, EDE: v.EDE, Enforced: enforced}
	if g.stats.bogus(e) {
		what := "passed on (shadow)"
		if enforced {
			what = "answered SERVFAIL (enforce)"
		} else if g.mode == Enforce && g.Enforcing() {
			what = "passed on (a signature not yet valid by a clock no time service has confirmed)"
		} else if g.mode == Enforce {
			what = "passed on (enforce waits for the system clock to be set)"
		}
		g.log.Warn("DNSSEC bogus answer "+what,
			zap.String("name", e.Name), zap.String("zone", e.Zone), zap.String("reason", e.Reason), zap.Uint16("ede", e.EDE))
	}
	if enforced {
		g.stats.enforced.Add(1)
	}
	return enforced
}

// withDO is q with the DO bit set in a copy of its OPT record (one is
// added when q has none).
func withDO(q *dns.Msg) *dns.Msg {
	m := *q
	m.Extra = make([]dns.RR, 0, len(q.Extra)+1)
	found := false
	for _, rr := range q.Extra {
		if o, ok := rr.(*dns.OPT); ok {
			c := *o
			c.SetDo()
			rr, found = &c, true
		}
		m.Extra = append(m.Extra, rr)
	}
	if !found {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.SetDo()
		m.Extra = append(m.Extra, o)
	}
	return &m
}

// strip leaves out the RRSIG, NSEC and NSEC3 records of a section,
// except those of the type asked for; an ANY answer keeps its RRSIGs, as
// Unbound's does (docs/protocol.md).
func strip(rrs []dns.RR, qtype uint16) []dns.RR {
	if qtype == dns.TypeANY {
		return rrs
	}
	keep := 0
	for _, rr := range rrs {
		if t := rr.Header().Rrtype; (t == dns.TypeRRSIG || t == dns.TypeNSEC || t == dns.TypeNSEC3) && t != qtype {
			continue
		}
		keep++
	}
	if keep == len(rrs) {
		return rrs
	}
	out := make([]dns.RR, 0, keep)
	for _, rr := range rrs {
		if t := rr.Header().Rrtype; (t == dns.TypeRRSIG || t == dns.TypeNSEC || t == dns.TypeNSEC3) && t != qtype {
			continue
		}
		out = append(out, rr)
	}
	return out
}

// capTTL lowers the TTLs above max to max, on copies of those records (the
// upstream's message is left as it was): a secure answer is not kept past
// its signatures' expiration (RFC 4035 §5.3.3).
func capTTL(rrs []dns.RR, max uint32) []dns.RR {
	var out []dns.RR
	for i, rr := range rrs {
		if rr.Header().Ttl <= max {
			continue
		}
		if out == nil {
			out = append([]dns.RR(nil), rrs...)
		}
		c := dns.Copy(rr)
		c.Header().Ttl = max
		out[i] = c
	}
	if out == nil {
		return rrs
	}
	return out
}

// maxEDEText keeps the SERVFAIL within a 512-byte answer.
const maxEDEText = 180

// servfail is enforce's answer to a bogus verdict: SERVFAIL with the EDE,
// whose text the server relays and the query log records.
func servfail(q *dns.Msg, v Result) *dns.Msg {
	m := new(dns.Msg)
	m.SetRcode(q, dns.RcodeServerFailure)
	text := v.Zone + ": " + v.Reason
	if len(text) > maxEDEText {
		text = text[:maxEDEText]
	}
	o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	o.SetUDPSize(1232)
	o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: v.EDE, ExtraText: text})
	m.Extra = []dns.RR{o}
	return m
}
