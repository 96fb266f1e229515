package dnssec

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/singleflight"
)

// Status is a validation verdict (RFC 4033 §5).
type Status uint8

const (
	Indeterminate Status = iota
	Secure
	Insecure
	Bogus
)

func (s Status) String() string {
	switch s {
	case Secure:
		return "secure"
	case Insecure:
		return "insecure"
	case Bogus:
		return "bogus"
	case Indeterminate:
		return "indeterminate"
	}
	return "indeterminate"
}

// Result is the verdict on one answer.
type Result struct {
	Status Status
	// Zone is the zone whose records or keys decided a Bogus or Insecure
	// verdict (the signer, or the delegation proven unsigned); "" otherwise.
	Zone string
	// Reason says why, for the log and the operator ("" when Secure).
	Reason string
	// EDE is the RFC 8914 code of a Bogus verdict (6, 7, 8, 9, 10, 12).
	EDE uint16
	// ValidUntil is, for a Secure verdict, when the first signature it
	// rests on expires: no record of the answer may be kept past it (RFC
	// 4035 §5.3.3). Zero otherwise.
	ValidUntil time.Time
}

func (r Result) String() string {
	if r.Reason == "" {
		return r.Status.String()
	}
	return fmt.Sprintf("%s (%s: %s)", r.Status, r.Zone, r.Reason)
}

// The bounds on the work of one query (the package comment).
const (
	MaxVerifications   = 32
	MaxKeyTries        = 8
	MaxHashes          = 48
	MaxFetches         = 24
	MaxNSEC3Iterations = 150
	// maxChain bounds the CNAME and DNAME links followed in one answer.
	maxChain = 12
)

// Fetch asks for name and qtype with DNSSEC records (DO=1) and checking
// disabled (CD=1), and returns the answer or why there is none. It must
// return by ctx's deadline.
type Fetch func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error)

// Config is a Validator's setting.
type Config struct {
	// Anchors are the trust anchors: DS or DNSKEY records. Empty means the
	// built-in root anchors (RootAnchors).
	Anchors []dns.RR
	// Fetch gets the DS and DNSKEY sets. Required.
	Fetch Fetch
	// Now is the validator's clock; nil is time.Now.
	Now func() time.Time
	// Skew is the clock error allowed either side of a signature's
	// validity period.
	Skew time.Duration
	// NTAs are the negative trust anchors (RFC 7646): no name at or below
	// one is validated.
	NTAs []string
	// ExtraNTA, when set, reports whether another source's negative trust
	// anchor (the dashboard's, which come and go) covers a name; it must
	// return at once.
	ExtraNTA func(name string) bool
}

// Validator validates answers. It is safe for concurrent use.
type Validator struct {
	anchors map[string][]*dns.DS
	fetch   Fetch
	now     func() time.Time
	skew    time.Duration
	ntas    atomic.Pointer[map[string]bool]
	extra   func(string) bool

	mu    sync.Mutex
	cache map[string]*zoneKeys
	group singleflight.Group
}

// cacheMax bounds the zone cache; when full it is emptied (a cold zone is
// fetched again, nothing is lost but work).
const cacheMax = 4096

// New builds a Validator; it fails when an anchor is neither DS nor
// DNSKEY or Fetch is missing.
func New(c Config) (*Validator, error) {
	if c.Fetch == nil {
		return nil, errors.New("dnssec: no Fetch")
	}
	anchors := c.Anchors
	if len(anchors) == 0 {
		anchors = RootAnchors()
	}
	v := &Validator{anchors: map[string][]*dns.DS{}, fetch: c.Fetch, now: c.Now, skew: c.Skew, extra: c.ExtraNTA, cache: map[string]*zoneKeys{}}
	if v.now == nil {
		v.now = time.Now
	}
	for _, rr := range anchors {
		var ds *dns.DS
		switch a := rr.(type) {
		case *dns.DS:
			ds = a
		case *dns.DNSKEY:
			ds = a.ToDS(dns.SHA256)
			if ds == nil {
				return nil, fmt.Errorf("dnssec: trust anchor %s: cannot compute its DS", rr.Header().Name)
			}
		default:
			return nil, fmt.Errorf("dnssec: trust anchor %s is a %s, not a DS or DNSKEY", rr.Header().Name, dns.TypeToString[rr.Header().Rrtype])
		}
		name := canonical(ds.Hdr.Name)
		v.anchors[name] = append(v.anchors[name], ds)
	}
	v.SetNTAs(c.NTAs)
	return v, nil
}

// SetNTAs replaces the negative trust anchors; queries already running may
// still use the old ones.
func (v *Validator) SetNTAs(names []string) {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[canonical(dns.Fqdn(n))] = true
	}
	v.ntas.Store(&m)
}

// nta reports the negative trust anchor covering name, "" for none.
func (v *Validator) nta(name string) string {
	if v.extra != nil && v.extra(name) {
		return name
	}
	m := *v.ntas.Load()
	if len(m) == 0 {
		return ""
	}
	for n := name; ; {
		if m[n] {
			return n
		}
		if n == "." {
			return ""
		}
		n = parent(n)
	}
}

// anchorFor reports the closest trust anchor at or above name, "" for none.
func (v *Validator) anchorFor(name string) string {
	for n := name; ; n = parent(n) {
		if _, ok := v.anchors[n]; ok {
			return n
		}
		if n == "." {
			return ""
		}
	}
}

// work is one query's budget (the package comment's bounds). Its counters
// are atomic: a zone's keys may be computed on another goroutine (once)
// while the query that started it goes on.
type work struct {
	sigs, hashes, fetches atomic.Int32
	// verified and hashed count the signature checks and NSEC3 hashes
	// actually done, apart from the budgets, so that ValidateCounted
	// measures the work rather than what the bounds allowed.
	verified, hashed atomic.Int32
}

func newWork() *work {
	w := &work{}
	w.sigs.Store(MaxVerifications)
	w.hashes.Store(MaxHashes)
	w.fetches.Store(MaxFetches)
	return w
}

// take spends one unit of c; false when none is left.
func take(c *atomic.Int32) bool { return c.Add(-1) >= 0 }

var errBudget = errors.New("validation work limit reached")

func budgetResult(zone string) Result {
	return Result{Status: Bogus, Zone: zone, EDE: dns.ExtendedErrorCodeDNSBogus, Reason: "validation work limit reached (KeyTrap bound, docs/dnssec.md)"}
}

// Validate gives the verdict on resp, the answer to its own question. It
// never modifies resp and returns by ctx's deadline (give or take one
// signature check).
func (v *Validator) Validate(ctx context.Context, resp *dns.Msg) Result {
	res, _ := v.validate(ctx, resp, newWork())
	return res
}

// ValidateCounted is Validate that also reports the signature
// verifications and NSEC3 hashes it did (for the bound's measurement).
func (v *Validator) ValidateCounted(ctx context.Context, resp *dns.Msg) (Result, int, int) {
	w := newWork()
	res, _ := v.validate(ctx, resp, w)
	return res, int(w.verified.Load()), int(w.hashed.Load())
}

func (v *Validator) validate(ctx context.Context, resp *dns.Msg, w *work) (Result, error) {
	if resp == nil || len(resp.Question) != 1 {
		return Result{Status: Indeterminate, Reason: "no question"}, nil
	}
	if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
		return Result{Status: Indeterminate, Reason: "rcode " + dns.RcodeToString[resp.Rcode] + ": nothing to validate"}, nil
	}
	q := resp.Question[0]
	qname := canonical(q.Name)
	if n := v.nta(qname); n != "" {
		return Result{Status: Insecure, Zone: n, Reason: "negative trust anchor"}, nil
	}
	anchor := v.anchorFor(qname)
	if anchor == "" {
		return Result{Status: Indeterminate, Reason: "no trust anchor above the name"}, nil
	}
	if zk := v.cached("k" + anchor); zk != nil && zk.Status == Bogus {
		// Every verdict under a trust anchor rests on its DNSKEY set: while
		// that set is known bogus, so is every answer under it, and no DS
		// or DNSKEY is looked up to find it out again (an upstream that
		// does not serve the root's keys would otherwise cost a lookup on
		// every miss).
		return zk.Result, nil
	}
	a := &answer{v: v, ctx: ctx, w: w, resp: resp, verdict: Result{Status: Secure}}
	a.run(qname, q.Qtype)
	if a.verdict.Status == Secure && a.validUntil != 0 {
		a.verdict.ValidUntil = time.Unix(a.validUntil, 0)
	}
	return a.verdict, nil
}
