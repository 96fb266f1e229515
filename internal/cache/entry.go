package cache

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// key is what makes two queries the same question to the cache (docs/design.md#cache):
// the name case-folded (0x20 clients vary its case, RFC 4343), type, class
// and the two DNSSEC bits that change what an upstream sends back. DO asks
// for signatures; CD=1 answers were not validated and must never reach a
// CD=0 client. And the pool it came from: a group with upstreams of its
// own (query.Event.Pool, "" for the main pool) never gets another pool's
// answer, nor gives its own to another (docs/filter.md "Per-group
// upstreams").
type key struct {
	name   string
	pool   string
	qtype  uint16
	qclass uint16
	flags  uint8
}

const (
	flagDO uint8 = 1 << iota
	flagCD
)

// keyOf is the key of a query with exactly one question.
func keyOf(m *dns.Msg) key {
	q := m.Question[0]
	k := key{name: strings.ToLower(q.Name), qtype: q.Qtype, qclass: q.Qclass}
	if o := m.IsEdns0(); o != nil && o.Do() {
		k.flags |= flagDO
	}
	if m.CheckingDisabled {
		k.flags |= flagCD
	}
	return k
}

func (k key) do() bool { return k.flags&flagDO != 0 }

// entry is one cached answer. Its message and times never change once
// stored; the atomics are the entry's own background state.
//
// The fields a fast-path hit reads come first, together, so that a hit
// reads one or two cache lines of the entry rather than three: on a CPU
// the clients' own work shares, each line is another wait for memory
// (docs/performance.md#answer-cache).
type entry struct {
	name    string                  // the key's name, the query's name in lower case: a hit's event takes it without reading msg
	stored  int64                   // Unix nanoseconds
	expires int64                   // Unix nanoseconds: stored + ttl seconds
	wires   atomic.Pointer[wireSet] // packed answers per query shape, for the server's fast path (hit.go)
	view    atomic.Pointer[view]    // the answer as last sent fresh, for one second of age
	cnames  *[]string               // the answer's CNAME targets, for the filter's check of a hit; nil for none
	ttl     uint32                  // the entry's lifetime in seconds, after clamping

	upTTL     uint32  // the lifetime the upstream's records gave, before clamping
	msg       dns.Msg // the answer: TTLs as clamped at store time, never modified once stored; allocated with the entry
	clamp     string  // what changed upTTL into ttl, for /api/cache/entry; "" for nothing
	negative  bool    // NXDOMAIN or NODATA (RFC 2308)
	origin    string  // the upstream or zone resolver that answered, redacted
	source    string  // query.SourcePool or query.ZonePrefix+zone
	staleView atomic.Pointer[dns.Msg]
	retryAt   atomic.Int64 // Unix ns; until then a stale entry is served at once (RFC 8767 §4)
	weight    uint32       // the entry's memory at its largest, in bytes (weight.go); set by store.put
}

// setAnswer notes that e.msg, now complete, is stored under a key of name.
func (e *entry) setAnswer(name string) {
	e.name = name
	var targets []string
	for _, rr := range e.msg.Answer {
		if c, ok := rr.(*dns.CNAME); ok {
			targets = append(targets, c.Target)
		}
	}
	if targets != nil {
		kept := targets // declared here, so that only an answer with a CNAME allocates it
		e.cnames = &kept
	}
}

// view is the answer rendered for one whole second of the entry's age: every
// query in that second shares it, so a hit costs no copy.
type view struct {
	age     int64 // seconds since stored
	msg     *dns.Msg
	summary string // query.Summary(msg), for the query event
}

func (e *entry) fresh(now int64) bool { return now < e.expires }

// usableStale reports whether an expired entry may still be served stale.
func (e *entry) usableStale(now int64, maxAge time.Duration) bool {
	return maxAge > 0 && now < e.expires+int64(maxAge)
}

// nearExpiry reports whether a fresh entry is in the last tenth of its TTL,
// where a hit triggers a prefetch (docs/design.md#cache-prefetch).
func (e *entry) nearExpiry(now int64) bool {
	return e.expires-now <= int64(e.ttl)*int64(time.Second)/10
}

// renderView renders the answer with every TTL decremented by the entry's
// age (docs/design.md#cache: decremented on the way out), with its summary, shared by
// every query in the same second of the entry's age.
func (e *entry) renderView(now int64) *view {
	age := max(now-e.stored, 0) / int64(time.Second)
	if v := e.view.Load(); v != nil && v.age == age {
		return v
	}
	m := e.withTTLs(func(ttl uint32) uint32 { return uint32(max(int64(ttl)-age, 0)) }, nil)
	v := &view{age: age, msg: m, summary: query.Summary(m)}
	e.view.Store(v)
	return v
}

// staleTTL is the TTL of a stale answer, RFC 8767 §4's suggestion: short
// enough that clients come back soon for the refreshed one.
const staleTTL = 30

// stale renders the expired answer: TTL 30 and Extended DNS Error 3.
func (e *entry) renderStale() *dns.Msg {
	if m := e.staleView.Load(); m != nil {
		return m
	}
	ede := &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeStaleAnswer, ExtraText: "served stale: no fresh answer in time"}
	m := e.withTTLs(func(uint32) uint32 { return staleTTL }, ede)
	// Past its TTL, which a validated answer's signatures capped, and after
	// a refresh that failed (in enforce perhaps as bogus): served, but not
	// as validated data (docs/dnssec.md).
	m.AuthenticatedData = false
	e.staleView.Store(m)
	return m
}

// withTTLs copies the stored answer with each record's TTL mapped by ttl.
// The OPT record is not a record with a TTL (its "TTL" holds flags): it is
// dropped, and replaced by one carrying ede when given.
func (e *entry) withTTLs(ttl func(uint32) uint32, ede *dns.EDNS0_EDE) *dns.Msg {
	m := &dns.Msg{MsgHdr: e.msg.MsgHdr, Question: e.msg.Question}
	m.Answer = copyRRs(e.msg.Answer, ttl)
	m.Ns = copyRRs(e.msg.Ns, ttl)
	m.Extra = copyRRs(e.msg.Extra, ttl)
	if ede != nil {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.Option = append(o.Option, ede)
		m.Extra = append(m.Extra, o)
	}
	return m
}

func copyRRs(rrs []dns.RR, ttl func(uint32) uint32) []dns.RR {
	if len(rrs) == 0 {
		return nil
	}
	out := make([]dns.RR, 0, len(rrs))
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		c := dns.Copy(rr)
		c.Header().Ttl = ttl(rr.Header().Ttl)
		out = append(out, c)
	}
	return out
}
