package server

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// RateLimiter is the per-device rate limit (docs/protocol.md "Rate
// limit"): a token bucket per device, refilled at qps tokens a second up
// to burst; a query takes one token, and a query that finds none is
// answered REFUSED with EDE 18. Exempt clients (a router forwarding the
// whole LAN, the host itself) are never limited.
//
// Memory is bounded whatever the sources: the buckets live in a table of
// at most maxRateBuckets, which a flood of spoofed sources fills and which
// then drops buckets, refilled ones first, else arbitrary ones. Dropping
// a bucket forgets a device's debt, so under such a flood a real flooder
// may get a fresh burst; the listeners' caps bound it still
// (docs/server.md).
type RateLimiter struct {
	perNS  float64 // tokens per nanosecond
	burst  float64
	exempt []netip.Prefix
	shards [rateShards]rateShard

	limited atomic.Uint64 // queries refused
	evicted atomic.Uint64 // buckets dropped from a full shard
}

// maxRateBuckets bounds the buckets held: a household has tens of
// devices, a large one hundreds; a flood of spoofed sources holds the
// table full at about 100 bytes a bucket, some 1.6 MB.
const (
	maxRateBuckets = 16384
	rateShards     = 16
	perShard       = maxRateBuckets / rateShards
)

type rateShard struct {
	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	_       [40]byte // keeps two shards' locks off one cache line
}

type bucket struct {
	tokens float64
	last   int64 // Unix ns of the last refill
}

var rateSeed = maphash.MakeSeed()

// NewRateLimiter returns a limiter of qps queries a second with bursts of
// burst, or nil (no limit) when qps is 0.
func NewRateLimiter(qps, burst int, exempt []netip.Prefix) *RateLimiter {
	if qps <= 0 {
		return nil
	}
	l := &RateLimiter{perNS: float64(qps) / float64(time.Second), burst: float64(max(burst, 1)), exempt: exempt}
	for i := range l.shards {
		l.shards[i].buckets = make(map[netip.Addr]*bucket)
	}
	return l
}

// deviceOf is the key a client's bucket is kept under: the IPv4 address,
// or the IPv6 /64 the address is in (query.ClientShareKey: a host picks
// any address of its /64 at will). It is the one place a device is named
// here, for the device identity by MAC address to replace.
func deviceOf(a netip.Addr) netip.Addr { return query.ClientShareKey(a).Addr() }

// Allow takes a token for client's device at now and reports whether
// there was one. A nil limiter allows everything.
func (l *RateLimiter) Allow(client netip.Addr, now time.Time) bool {
	if l.take(client, now) {
		return true
	}
	l.limited.Add(1)
	return false
}

// take is Allow without counting a refusal: the UDP fast path's, whose
// refused query the general path refuses (and counts) again.
func (l *RateLimiter) take(client netip.Addr, now time.Time) bool {
	if l.exempted(client) {
		return true
	}
	dev, sh := l.shardOf(client)
	ns := now.UnixNano()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	bk := sh.buckets[dev]
	if bk == nil {
		if len(sh.buckets) >= perShard {
			l.evict(sh, ns)
		}
		bk = &bucket{tokens: l.burst, last: ns}
		sh.buckets[dev] = bk
	}
	if ns > bk.last {
		bk.tokens = min(l.burst, bk.tokens+float64(ns-bk.last)*l.perNS)
		bk.last = ns
	}
	if bk.tokens < 1 {
		return false
	}
	bk.tokens--
	return true
}

// evict makes room in a full shard: every bucket that has refilled (it
// would start full anyway, so dropping it changes nothing), else an
// eighth of the shard, whichever the map's order gives first.
func (l *RateLimiter) evict(sh *rateShard, now int64) {
	full := l.burst / l.perNS // ns an empty bucket takes to refill
	for k, b := range sh.buckets {
		if float64(now-b.last) >= full {
			delete(sh.buckets, k)
		}
	}
	for k := range sh.buckets {
		if len(sh.buckets) < perShard-perShard/8 {
			break
		}
		delete(sh.buckets, k)
		l.evicted.Add(1)
	}
}

// RateSnapshot is the limiter's counters.
type RateSnapshot struct {
	Limited uint64 // queries refused by the limit
	Evicted uint64 // buckets dropped from a full table (a flood of sources)
	Devices int    // buckets held now
}

// Snapshot reads the counters; a nil limiter has none.
func (l *RateLimiter) Snapshot() RateSnapshot {
	if l == nil {
		return RateSnapshot{}
	}
	s := RateSnapshot{Limited: l.limited.Load(), Evicted: l.evicted.Load()}
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		s.Devices += len(sh.buckets)
		sh.mu.Unlock()
	}
	return s
}

// rateLimited is the EDE of a rate-limited query's REFUSED: 18
// "Prohibited" (RFC 8914 §4.19), the client is not allowed this query
// now. RFC 8914 has no rate-limit code; the text says which limit.
func rateLimited() *dns.EDNS0_EDE {
	return &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeProhibited, ExtraText: "rate limited: this device sent more than dns.rate_limit_qps (burst dns.rate_limit_burst)"}
}

// refund gives back the token Allow took for a query the UDP fast path
// then did not answer: the general path takes its own.
func (l *RateLimiter) refund(client netip.Addr) {
	if l.exempted(client) {
		return
	}
	dev, sh := l.shardOf(client)
	sh.mu.Lock()
	if bk := sh.buckets[dev]; bk != nil {
		bk.tokens = min(l.burst, bk.tokens+1)
	}
	sh.mu.Unlock()
}

// exempted reports whether client is never limited: a nil limiter limits
// nobody.
func (l *RateLimiter) exempted(client netip.Addr) bool {
	if l == nil {
		return true
	}
	for _, p := range l.exempt {
		if p.Contains(client) {
			return true
		}
	}
	return false
}

// shardOf is client's device and the shard its bucket lives in.
func (l *RateLimiter) shardOf(client netip.Addr) (netip.Addr, *rateShard) {
	dev := deviceOf(client)
	b := dev.As16()
	return dev, &l.shards[maphash.Bytes(rateSeed, b[:])%rateShards]
}
