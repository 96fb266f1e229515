package forward

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
)

// Bounds of name learning. Compiled, not knobs: they protect the process and
// the router, and no household needs to tune them.
const (
	// maxLearnedNames bounds the cache. A household has tens of clients, but
	// IPv6 privacy addresses rotate, so allow thousands; an entry is ~100 B.
	maxLearnedNames = 4096
	// maxPTRLookups bounds lookups in flight. The router is a small box; a
	// burst of new clients is learned a few at a time, and a client whose
	// lookup could not start is tried again on its next query.
	maxPTRLookups = 4
	// learnedMinTTL keeps a tiny PTR TTL from turning every query into a
	// lookup; learnedMaxTTL re-learns at least hourly, as DHCP leases move
	// names between addresses.
	learnedMinTTL = time.Minute
	learnedMaxTTL = time.Hour
	// negativeTTL is how long "no name" is believed (NXDOMAIN, no PTR,
	// SERVFAIL, timeout): a new device's name shows up within it, and a dead
	// router costs one lookup per client per interval.
	negativeTTL = time.Minute
)

// Names gives clients their display names for the query log (docs/design.md#learned-names):
// a static name from the configuration wins; otherwise a name learned by a
// PTR lookup through the forward zone covering the client's reverse name
// (for example "168.192.in-addr.arpa." for 192.168.x.x, or an ip6.arpa zone).
//
// Guarantees: Name never waits for the network. A lookup runs in the
// background, at most one per address and maxPTRLookups in all; its answer
// is cached for its TTL (clamped), a failure or empty answer for negativeTTL,
// and the cache holds at most maxLearnedNames entries. A failed lookup
// changes nothing but the cache. Close stops and waits for every lookup.
type Names struct {
	static  map[netip.Addr]string // immutable after NewNames
	allowed func(netip.Addr) bool // only these clients are learned; nil: none
	reverse *Table                // nil when no zone can cover a reverse name
	log     *zap.Logger
	ctx     context.Context // ends the lookups on Close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // one per lookup goroutine

	mu      sync.Mutex // guards the fields below
	closed  bool       // no lookup starts after Close
	learned map[netip.Addr]learnedName
	pending map[netip.Addr]struct{} // lookups in flight; len ≤ maxPTRLookups

	// Fixed before the first Name call; tests shrink or replace them.
	maxEntries int
	now        func() time.Time
	stored     func(ip netip.Addr, name string) // test hook: a lookup's result was stored
}

// learnedName is a cached lookup result; name "" records that none exists.
type learnedName struct {
	name    string
	expires time.Time
}

// NamesOptions configures NewNames.
type NamesOptions struct {
	Logger *zap.Logger // failed lookups at debug level; nil logs nothing
	// Allowed reports whether a client is inside dns.allow: only those are
	// looked up and cached (docs/design.md#learned-names). A refused or spoofed source must not
	// make nxdns query the LAN resolver or take a cache entry. It is a
	// function because dns.allow's "local" follows the host's interfaces;
	// it must return at once. nil learns no name at all.
	Allowed func(netip.Addr) bool
}

// NewNames builds the name source. static maps client addresses to
// configured names (IPv4-mapped IPv6 keys are unmapped); zones is the forward
// zone table, whose reverse zones are used for PTR lookups (it may be nil).
func NewNames(static map[netip.Addr]string, zones *Table, opts NamesOptions) *Names {
	ctx, cancel := context.WithCancel(context.Background())
	n := &Names{
		static:     make(map[netip.Addr]string, len(static)),
		log:        opts.Logger,
		allowed:    opts.Allowed,
		ctx:        ctx,
		cancel:     cancel,
		learned:    make(map[netip.Addr]learnedName),
		pending:    make(map[netip.Addr]struct{}),
		maxEntries: maxLearnedNames,
		now:        time.Now,
	}
	if n.log == nil {
		n.log = zap.NewNop()
	}
	for ip, name := range static {
		n.static[query.ClientOf(ip)] = name
	}
	if coversReverse(zones) {
		n.reverse = zones
	}
	return n
}

// coversReverse reports whether any zone could hold a PTR name, so a
// configuration without reverse zones pays nothing per query.
func coversReverse(t *Table) bool {
	for _, z := range t.Zones() {
		for _, tree := range []string{"in-addr.arpa.", "ip6.arpa."} {
			if dns.IsSubDomain(z.name, tree) || dns.IsSubDomain(tree, z.name) {
				return true
			}
		}
	}
	return false
}

// Name returns the client's static or learned name, or "" when none is
// known yet (always "" for a client outside Allow without a static name:
// it is neither looked up nor cached). On a miss (or an expired entry, whose old name is returned
// meanwhile) it starts a background lookup when a reverse zone covers the
// address, no lookup for it is in flight, and fewer than maxPTRLookups are.
func (n *Names) Name(client netip.Addr) string {
	ip := query.ClientOf(client) // the key the static names were stored under
	if name, ok := n.static[ip]; ok {
		return name
	}
	if n.reverse == nil || !n.isAllowed(ip) {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	e, ok := n.learned[ip]
	if ok && n.now().Before(e.expires) {
		return e.name
	}
	n.startLocked(ip)
	return e.name
}

// allowed reports whether ip is a client nxdns answers, and so one whose
// name is worth a lookup.
func (n *Names) isAllowed(ip netip.Addr) bool { return n.allowed != nil && n.allowed(ip) }

// startLocked starts a lookup for ip unless one is running, the bound is
// reached, Names is closed, or no zone covers the address.
func (n *Names) startLocked(ip netip.Addr) {
	if _, busy := n.pending[ip]; busy || n.closed || len(n.pending) >= maxPTRLookups {
		return
	}
	ptr := reverseName(ip)
	zone, ok := n.reverse.Match(ptr)
	if !ok {
		return
	}
	n.pending[ip] = struct{}{}
	n.wg.Go(func() { n.learn(ip, zone, ptr) })
}

// learn runs one lookup and stores its result.
func (n *Names) learn(ip netip.Addr, zone *Zone, ptr string) {
	name, ttl := n.lookup(zone, ptr)
	n.mu.Lock()
	delete(n.pending, ip)
	if n.ctx.Err() != nil {
		n.mu.Unlock()
		return // closed: a cancelled lookup is no evidence of "no name"
	}
	n.storeLocked(ip, learnedName{name: name, expires: n.now().Add(ttl)})
	n.mu.Unlock()
	if n.stored != nil {
		n.stored(ip, name)
	}
}

// lookup asks the zone for ptr's PTR record. It returns the name without
// its final dot and how long to believe it; every failure is "no name" for
// negativeTTL. Zone.Resolve bounds it by read_timeout.
func (n *Names) lookup(zone *Zone, ptr string) (string, time.Duration) {
	q := new(dns.Msg)
	q.SetQuestion(ptr, dns.TypePTR)
	resp, _, err := zone.Resolve(n.ctx, q)
	if err != nil {
		n.log.Debug("client name lookup failed", zap.String("ptr", ptr),
			zap.String("resolver", zone.url), zap.Error(err))
		return "", negativeTTL
	}
	for _, rr := range resp.Answer {
		// Any PTR in a validated answer to our question: after an RFC 2317
		// CNAME its owner is the alias target, not ptr.
		if p, ok := rr.(*dns.PTR); ok && p.Ptr != "." && p.Ptr != "" {
			return strings.TrimSuffix(p.Ptr, "."), clampTTL(p.Hdr.Ttl)
		}
	}
	return "", negativeTTL
}

// clampTTL turns a PTR record's TTL into a cache lifetime within
// [learnedMinTTL, learnedMaxTTL].
func clampTTL(ttl uint32) time.Duration {
	return min(max(time.Duration(ttl)*time.Second, learnedMinTTL), learnedMaxTTL)
}

// storeLocked caches e, evicting first when the cache is full.
func (n *Names) storeLocked(ip netip.Addr, e learnedName) {
	if _, ok := n.learned[ip]; !ok && len(n.learned) >= n.maxEntries {
		n.evictLocked()
	}
	n.learned[ip] = e
}

// evictLocked drops every expired entry and, if that is not enough, the
// eighth of the entries closest to expiry (the oldest knowledge), so the
// scan runs once per maxEntries/8 insertions rather than on each one.
func (n *Names) evictLocked() {
	now := n.now()
	for ip, e := range n.learned {
		if !now.Before(e.expires) {
			delete(n.learned, ip)
		}
	}
	if len(n.learned) < n.maxEntries {
		return
	}
	expiries := make([]time.Time, 0, len(n.learned))
	for _, e := range n.learned {
		expiries = append(expiries, e.expires)
	}
	slices.SortFunc(expiries, time.Time.Compare)
	cutoff := expiries[max(len(expiries)/8, 1)-1]
	for ip, e := range n.learned {
		if !e.expires.After(cutoff) {
			delete(n.learned, ip)
		}
	}
}

// Close stops the lookups in flight and waits for them; Name keeps
// answering from the static names and the cache but learns nothing more.
func (n *Names) Close() {
	n.mu.Lock()
	n.closed = true // under mu: no wg.Go can follow the Wait below
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

// reverseName is ip's PTR owner name: "4.3.2.1.in-addr.arpa." or 32 nibbles
// then "ip6.arpa." (RFC 1035 §3.5, RFC 3596 §2.5), lower case as Match wants.
func reverseName(ip netip.Addr) string {
	const hex = "0123456789abcdef"
	var b []byte
	if ip.Is4() {
		a := ip.As4()
		b = make([]byte, 0, len("255.255.255.255.in-addr.arpa."))
		for i := 3; i >= 0; i-- {
			b = appendUint8(b, a[i])
			b = append(b, '.')
		}
		return string(append(b, "in-addr.arpa."...))
	}
	a := ip.As16()
	b = make([]byte, 0, 64+len("ip6.arpa."))
	for i := 15; i >= 0; i-- {
		b = append(b, hex[a[i]&0xf], '.', hex[a[i]>>4], '.')
	}
	return string(append(b, "ip6.arpa."...))
}

func appendUint8(b []byte, v uint8) []byte {
	if v >= 100 {
		b = append(b, '0'+v/100)
	}
	if v >= 10 {
		b = append(b, '0'+v/10%10)
	}
	return append(b, '0'+v%10)
}
