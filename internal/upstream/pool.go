package upstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/nxdns/nxdns/internal/stats"
)

// DefaultSlots is how many exchanges one entry runs at once (docs/design.md#pool-slots). 32
// lets the browser burst of docs/design.md#burst-staircase (about 30 unique names at once) go to one
// upstream together and finish in about one round trip: DoT pipelines them on
// one connection and DoH multiplexes them as HTTP/2 streams, so a slot costs
// one message in flight, not a connection or a handshake. Fewer slots bring
// back the staircase: the burst resolves in waves of round trips.
//
// The exposure it buys: an upstream that stalls without failing holds at most
// DefaultSlots queries, each for at most one attempt_timeout, before they fail
// over. Queries arriving meanwhile find its slots taken and sweep on to the
// next entry without waiting (docs/design.md#pool-admission). The first backoffThreshold expiries
// put the entry in backoff, and from then on only the background prober
// touches it, one probe at a time and outside the slots, so a dead upstream
// costs at most one slot-full of queries per outage, not one per backoff
// interval; the start-up and reload probes find an upstream that is already
// dead before live queries do.
const DefaultSlots = 32

// MaxMembers is the pool's compiled bound on entries: a query records the
// entries it tried in one 64-bit mask. Config validation enforces the same
// bound (TooManyUpstreams).
const MaxMembers = 64

// Member is one enabled upstream handed to New. The pool owns Client from
// New's success on and closes it in Close.
type Member struct {
	Endpoint Endpoint
	Client   Client
	Priority int // lower is tried first; equal priorities keep the given order
}

// Options are the pool's budgets (docs/design.md#config-budgets, upstream.*).
type Options struct {
	Attempt time.Duration // one attempt against one upstream
	Total   time.Duration // the per-query budget: every wait and attempt together
	Logger  *zap.Logger   // nil logs nothing
	Slots   int           // per entry; 0 means DefaultSlots (only `nxdns check --probe` sets 1)
	// Observer hears each entry's entering and leaving backoff (health.go);
	// nil hears nothing.
	Observer HealthObserver
}

// Pool is the priority-failover upstream pool (docs/design.md#pool). Resolve is safe for
// concurrent use; Start and Close are called once each by the owner.
type Pool struct {
	entries        []*entry // sorted by priority, stable
	attemptTimeout time.Duration
	total          time.Duration
	log            *zap.Logger
	board          board          // wakes blocked admissions (admission.go)
	shares         shares         // each client's slots held and queries waiting (fair.go)
	exhausted      atomic.Uint64  // queries that ended in BudgetExhausted
	observer       HealthObserver // nil: nobody listens

	probeCtx   context.Context // ends the probers; cancelled by Close
	stopProbes context.CancelFunc
	probes     sync.WaitGroup

	mu       sync.Mutex // guards started and closed
	started  bool
	closed   bool
	closeErr error
}

// entry is one upstream inside the pool.
type entry struct {
	index    int      // position in the members given to New (the metrics label)
	pos      uint8    // position in Pool.entries
	bit      uint64   // 1 << pos: the entry in a query's tried mask
	url      string   // redacted: the only name logs, metrics and errors use
	alone    []string // {url}: Tried of a query only this entry's exchange ran for, shared by all of them
	endpoint Endpoint // its Scrub redacts a cause before it is logged
	client   Client
	slots    int
	sem      *semaphore.Weighted // one permit per slot; only TryAcquire and Release
	health   health

	inFlight    atomic.Int64  // exchanges running now
	queued      atomic.Uint64 // blocking waits that ended on this entry
	queuedNanos atomic.Int64  // their total length
	successes   atomic.Uint64 // attempts recorded as health successes
	failures    atomic.Uint64 // attempts recorded as health failures
	probeOK     atomic.Uint64 // background probes that succeeded
	probeFailed atomic.Uint64 // background probes that failed (cancelled ones count in neither)
	backoffs    atomic.Uint64 // backoff episodes begun
	latency     stats.Histogram
}

// New builds a pool of members sorted by priority. It fails, leaving the
// clients to the caller, when there are no members or more than MaxMembers,
// or when a budget is not positive.
func New(opts Options, members []Member) (*Pool, error) {
	switch {
	case len(members) == 0:
		return nil, errors.New("upstream: a pool needs at least one upstream")
	case len(members) > MaxMembers:
		return nil, fmt.Errorf("upstream: %d upstreams, at most %d", len(members), MaxMembers)
	case opts.Attempt <= 0 || opts.Total <= 0:
		return nil, fmt.Errorf("upstream: attempt (%v) and total (%v) budgets must be positive", opts.Attempt, opts.Total)
	case opts.Slots < 0:
		return nil, fmt.Errorf("upstream: %d slots", opts.Slots)
	}
	slots := cmp.Or(opts.Slots, DefaultSlots)
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(members[a].Priority, members[b].Priority) })

	p := &Pool{attemptTimeout: opts.Attempt, total: opts.Total, log: log.Named("pool"), observer: opts.Observer}
	for pos, i := range order {
		m := members[i]
		if m.Client == nil {
			return nil, fmt.Errorf("upstream: member %d (%s) has no client", i, m.Endpoint.Redacted())
		}
		p.entries = append(p.entries, &entry{
			index:    i,
			pos:      uint8(pos),
			bit:      1 << pos,
			url:      m.Endpoint.Redacted(),
			alone:    []string{m.Endpoint.Redacted()},
			endpoint: m.Endpoint,
			client:   m.Client,
			slots:    slots,
			sem:      semaphore.NewWeighted(int64(slots)),
			health:   health{kick: make(chan struct{}, 1), verify: make(chan struct{}, 1)},
		})
	}
	p.probeCtx, p.stopProbes = context.WithCancel(context.Background())
	return p, nil
}

// Start probes every entry once in the background and keeps probing entries
// in backoff until Close (docs/design.md#pool-health). It returns at once.
func (p *Pool) Start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	for _, e := range p.entries {
		p.probes.Go(func() { p.probeLoop(p.probeCtx, e) })
	}
}

// Close stops the probers, waits for them, and closes every client. Queries
// still running see their clients close; the owner drains them first.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return p.closeErr
	}
	p.closed = true
	p.stopProbes()
	p.probes.Wait()
	var errs []error
	for _, e := range p.entries {
		if err := e.client.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.url, err))
		}
	}
	p.closeErr = errors.Join(errs...)
	return p.closeErr
}

// query is one Resolve's state. It lives on Resolve's stack.
type query struct {
	client       netip.Prefix      // whose share of the slots it counts in (fair.go)
	hasClient    bool              // false: counted in no share (the prober, nxdns's own lookups)
	tried        uint64            // bit per entry admitted once (docs/design.md#pool-admission step 6)
	order        [MaxMembers]uint8 // positions of the entries whose exchange started, in order
	n            int               // how many of order are set
	attributed   string            // the upstream the outcome is attributed to (docs/design.md#pool-attribution), "" for none
	last         *AttemptError     // the last peer fault
	answer       *dns.Msg          // the answer to return, once there is one
	servfail     *dns.Msg          // the last SERVFAIL that failed over, returned if nothing better comes
	servfailFrom string
}

// candidate reports whether the query may still be admitted to e, given the
// entries in backoff as one sweep read them.
func (qs *query) candidate(e *entry, backoff uint64, lastResort bool) bool {
	return qs.tried&e.bit == 0 && (lastResort || backoff&e.bit == 0)
}

// lastResort reports whether the query is in step 5: no entry outside
// backoff is left untried (all is the mask of every entry). A query holding
// a SERVFAIL does not go there: it already has an answer from a serving
// upstream (docs/design.md#pool-classification).
func (qs *query) lastResort(backoff, all uint64) bool {
	return qs.servfail == nil && all&^qs.tried&^backoff == 0
}

// started notes that e's exchange ran, for QueryError.Tried.
func (qs *query) started(e *entry) {
	qs.order[qs.n] = e.pos
	qs.n++
}

// Result is what resolving one query learned, for the query event: the
// answer (nil on a failure), the upstream or zone resolver it is attributed
// to — the one that answered, or the one a failure is blamed on; "" for
// none, never invented (docs/design.md#pool-classification) — and every upstream whose exchange ran,
// in order, on an answer as on a failure (read only: the pool may share
// it between queries). URLs are redacted. The pool and
// each forward zone return one from Exchange, the route's one way of
// learning who was asked.
type Result struct {
	Msg      *dns.Msg
	Upstream string
	Tried    []string
}

// Resolve answers q through the pool. It fixes one deadline when the query
// enters and every wait and attempt spends it (docs/design.md#pool-deadline). The string is
// the answering upstream's redacted URL, "" for none. Errors are
// *QueryError. Resolve does not modify q, but for the packing Client
// describes, and keeps nothing of it once it returns.
func (p *Pool) Resolve(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
	resp, up, _, err := p.resolve(ctx, q)
	return resp, up, err
}

// Exchange is Resolve for the route (server.Resolver): the Result lists
// every upstream whose exchange ran, on an answer after a failover too
// (docs/design.md#pool-classification, "the query event also lists every upstream tried"), and on a
// failure names the upstream the QueryError attributes it to.
func (p *Pool) Exchange(ctx context.Context, q *dns.Msg) (Result, error) {
	resp, up, tried, err := p.resolve(ctx, q)
	if qe, ok := errors.AsType[*QueryError](err); ok && up == "" {
		up = qe.Attributed
	}
	return Result{Msg: resp, Upstream: up, Tried: tried}, err
}

// resolve is Resolve with every upstream whose exchange ran, in order,
// redacted; on failure they are the QueryError's Tried as well.
func (p *Pool) resolve(ctx context.Context, q *dns.Msg) (*dns.Msg, string, []string, error) {
	// The deadline is a time, not a context: a wait builds its context from
	// it (admit) and an attempt folds it into its own (attempt), so the query
	// runs under one timer at a time, and a query that neither waits nor
	// fails over arms exactly one (docs/performance.md "The miss path, end
	// to end" counts what that saves).
	deadline := time.Now().Add(p.total)
	var qs query
	qs.client, qs.hasClient = shareKey(ctx)
	var allDown time.Time // when the all-down pass ends; zero until it begins
	waitEnd := deadline   // how long a wait for a slot may last
	for {
		if allDown.IsZero() && p.backoffMask() == p.all() {
			allDown = time.Now().Add(probeTimeout)
			// A wait for a dead entry's slot that outlasts the pass ends the
			// query as the pool's own time running out (EDE 22), like any
			// wait; an attempt cut at its share is evidence (attemptLimit).
			waitEnd = earliest(deadline, allDown)
		}
		e, err := p.admit(ctx, waitEnd, &qs)
		if e == nil {
			resp, up, ferr := p.finish(&qs, err)
			return resp, up, p.triedURLs(&qs), ferr
		}
		qs.tried |= e.bit
		resp, aerr := p.attempt(ctx, deadline, e, &qs, q, p.attemptLimit(&qs, allDown))
		if p.record(&qs, e, resp, aerr) {
			resp, up, ferr := p.finish(&qs, aerr)
			return resp, up, p.triedURLs(&qs), ferr
		}
	}
}

// earliest is the earlier of two instants.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// attemptLimit is how long the next attempt may run. Normally that is
// attempt_timeout. When every enabled upstream is in backoff
// (docs/design.md#pool-last-resort) the query does not spend its budget on the dead: the last-resort
// pass as a whole gets one probe timeout (allDown is its end), shared
// equally by the entries it has yet to try, so each is asked once, an entry
// that fails fast leaves its share to the next, and the client gets its
// SERVFAIL (or stale answer) within about a second while the prober brings
// the upstreams back. An attempt cut at its share had all the time the pass
// gives an upstream in backoff — the probe's own standard — so its expiry
// is evidence (KindAttemptExpired), never the query's budget. Once the pass
// is over the limit is zero or less, and the query's time for the dead is
// spent (attempt).
func (p *Pool) attemptLimit(qs *query, allDown time.Time) time.Duration {
	if allDown.IsZero() {
		return p.attemptTimeout
	}
	left := 0
	for _, e := range p.entries {
		if qs.tried&e.bit == 0 {
			left++
		}
	}
	share := time.Until(allDown) / time.Duration(left+1) // +1: the entry about to run is marked tried
	return min(p.attemptTimeout, share)
}

// record applies the table of docs/design.md#pool-classification to one attempt: health, attribution and
// whether the query is over. Attribution changes only here, after the attempt.
func (p *Pool) record(qs *query, e *entry, resp *dns.Msg, err *AttemptError) (done bool) {
	if err == nil {
		return p.recordAnswer(qs, e, resp)
	}
	if err.Upstream == "" {
		return true // the deadline passed before the exchange could start
	}
	qs.started(e)
	switch err.Kind.Group() {
	case PeerFault: // a full expiry or a completed failure, even if truncated
		e.failures.Add(1)
		p.recordFailure(e, err, false)
		qs.attributed, qs.last = e.url, err
		return false
	case BudgetExhausted, LocalResource, Cancellation:
		return true // evidence about the budget or about us: health untouched
	}
	panic("upstream: unreachable group")
}

// recordAnswer handles an attempt that returned a response. REFUSED and
// NOTIMP may mean this upstream will not serve us, or only that it will not
// serve this query (a class, a type, a name its policy refuses), which a
// client chooses: so the query tries the next upstream, but health is left
// to the prober, asked for one probe (askVerify), whose `. NS` every serving
// upstream answers. A client's queries alone can never put an upstream in
// backoff (docs/upstream-pool.md "Health"). A SERVFAIL without a DNSSEC
// reason may be one upstream's outage, so the query tries the next, but it
// is never held against health either (health means reachable and serving).
func (p *Pool) recordAnswer(qs *query, e *entry, resp *dns.Msg) (done bool) {
	qs.started(e)
	switch {
	case resp.Rcode == dns.RcodeRefused || resp.Rcode == dns.RcodeNotImplemented:
		err := &AttemptError{Upstream: e.url, Kind: KindRcode, Err: rcodeError(resp.Rcode)}
		e.askVerify()
		qs.attributed, qs.last = e.url, err
		return false
	case resp.Rcode == dns.RcodeServerFailure && !dnssecFailure(resp):
		qs.servfail, qs.servfailFrom = resp, e.url
		return false
	}
	e.successes.Add(1)
	p.recordSuccess(e)
	qs.answer, qs.attributed = resp, e.url
	return true
}

// finish turns the query's state into Resolve's results. end is what ended
// it (nil when every candidate was tried, then the last peer fault decides).
func (p *Pool) finish(qs *query, end *AttemptError) (*dns.Msg, string, error) {
	if qs.answer != nil {
		return qs.answer, qs.attributed, nil
	}
	if end == nil {
		end = qs.last
	}
	// A SERVFAIL in hand is an upstream's answer, better than ours; only a
	// client that left gets nothing.
	if qs.servfail != nil && (end == nil || end.Kind.Group() != Cancellation) {
		return qs.servfail, qs.servfailFrom, nil
	}
	if end == nil { // unreachable: every attempt leaves an answer or an error
		end = &AttemptError{Kind: KindNoResources, Err: errors.New("no upstream attempted")}
	}
	if end.Kind == KindBudgetExhausted {
		p.exhausted.Add(1) // once per query: finish runs once
	}
	return nil, qs.attributed, &QueryError{
		Kind:       end.Kind,
		Tried:      p.triedURLs(qs),
		Attributed: qs.attributed,
		Budget:     p.total,
		Err:        end,
	}
}

// triedURLs is qs's Tried. The common one, a single exchange, is the
// entry's own slice, allocated once with the pool (a miss allocates it no
// more: docs/performance.md "The miss path, end to end"); Tried is read,
// never modified, by every consumer.
func (p *Pool) triedURLs(qs *query) []string {
	switch qs.n {
	case 0:
		return nil
	case 1:
		return p.entries[qs.order[0]].alone
	}
	urls := make([]string, qs.n)
	for i, pos := range qs.order[:qs.n] {
		urls[i] = p.entries[pos].url
	}
	return urls
}

// dnssecFailure reports whether a SERVFAIL carries a DNSSEC Extended DNS
// Error (RFC 8914 info codes 6–12, "DNSSEC Bogus" to "NSEC Missing"): a
// validation verdict that every healthy upstream would repeat, so it is the
// answer (docs/design.md#pool-classification).
func dnssecFailure(resp *dns.Msg) bool {
	opt := resp.IsEdns0()
	if opt == nil {
		return false
	}
	for _, o := range opt.Option {
		if ede, ok := o.(*dns.EDNS0_EDE); ok &&
			ede.InfoCode >= dns.ExtendedErrorCodeDNSBogus && ede.InfoCode <= dns.ExtendedErrorCodeNSECMissing {
			return true
		}
	}
	return false
}

// rcodeError is the underlying error of a KindRcode attempt, for the log.
type rcodeError int

func (r rcodeError) Error() string { return "rcode " + dns.RcodeToString[int(r)] }
