package cache

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// Negative caching bounds (RFC 2308). The SOA's values are the upstream
// zone's to choose, and a broken or hostile zone can say anything, so they
// are capped as Unbound caps them (cache-max-negative-ttl 3600).
const (
	// maxNegativeTTL caps a negative answer's lifetime.
	maxNegativeTTL = 3600
	// noSOANegativeTTL is how long a negative answer without an SOA is kept:
	// RFC 2308 §5 says not at all, but a few seconds absorb a burst of the
	// same failing lookup (a client retrying in a loop) without hiding a
	// name that appears.
	noSOANegativeTTL = 5
	// zoneNegativeTTL caps a forward zone's negative answers: a router that
	// has just rebooted answers NXDOMAIN for LAN names it has not learned
	// again yet, and that must not stick for the SOA's hour (AdGuard Home
	// #8414).
	zoneNegativeTTL = 60
	// maxTTLField is RFC 2181 §8: a TTL with the top bit set is treated as 0.
	maxTTLField = 1<<31 - 1
)

// The clamp reasons of the constant bounds, built once rather than per
// answer.
var (
	noSOAClamp           = fmt.Sprintf("negative without SOA: kept %d s", noSOANegativeTTL)
	negativeCapClamp     = fmt.Sprintf("negative capped at %d s", maxNegativeTTL)
	zoneNegativeCapClamp = fmt.Sprintf("forward-zone negative capped at %d s", zoneNegativeTTL)
)

// limits are the clamps of docs/design.md#cache in seconds.
type limits struct {
	min, max uint32
}

// prepare turns an upstream's answer into an entry, or nil when the answer
// must not be cached (the never-cache list of docs/design.md#cache-never: SERVFAIL and every rcode
// but NOERROR and NXDOMAIN, truncated answers, a TTL that clamps to 0).
// resp is not modified: the entry holds copies of its records.
func prepare(resp *dns.Msg, k key, lim limits, now time.Time, origin, source string) *entry {
	if resp == nil || resp.Truncated || len(resp.Question) != 1 {
		return nil
	}
	if source == query.SourceRebinding {
		// An answer rebinding protection refused (docs/protocol.md): the
		// next query asks again, and gets the refusal's reason again.
		return nil
	}
	if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
		return nil
	}
	e := &entry{stored: now.UnixNano(), origin: origin, source: source}
	m := &e.msg
	*m = dns.Msg{MsgHdr: resp.MsgHdr, Question: resp.Question}
	m.Id = 0
	keep := func(rr dns.RR) bool { return k.do() || !dnssecOnly(rr.Header().Rrtype, k.qtype) }
	// RFC 3225 §3: an explicit ANY asks for every record at the name, its
	// signatures and NSEC among them, DO or not.
	keepAnswer := keep
	if k.qtype == dns.TypeANY {
		keepAnswer = func(dns.RR) bool { return true }
	}
	m.Answer = filterRRs(resp.Answer, keepAnswer)
	m.Ns = filterRRs(resp.Ns, keep)
	m.Extra = filterRRs(resp.Extra, func(rr dns.RR) bool { return rr.Header().Rrtype != dns.TypeOPT && keep(rr) })
	// AD stays whatever the key: nxdns asks every upstream with AD=1 (RFC
	// 6840 §5.7), and the server's reply gives it to the clients that set
	// DO or AD (§5.8), from the same entry (docs/cache.md "Key, clamps and
	// what is never cached").
	e.setAnswer(k.name)
	e.negative = m.Rcode == dns.RcodeNameError || !answers(m.Answer, k.name, k.qtype)
	var ttl uint32
	if e.negative {
		ttl, e.upTTL, e.clamp = negativeTTL(m, lim, strings.HasPrefix(source, query.ZonePrefix))
		if len(m.Answer) > 0 {
			// A CNAME chain ending in NXDOMAIN or NODATA (RFC 2308 §2.1,
			// §2.2): no record outlives its own TTL, so the entry lasts no
			// longer than the chain's shortest, and the SOA counts down with
			// the entry.
			chain, up, why := rrsetTTLs([][]dns.RR{m.Answer}, lim)
			if chain < ttl {
				ttl, e.clamp = chain, cmp.Or(why, fmt.Sprintf("negative behind a CNAME: kept for the chain's %d s", chain))
				for _, rr := range m.Ns {
					rr.Header().Ttl = ttl
				}
			}
			e.upTTL = min(e.upTTL, up)
		}
	} else {
		ttl, e.upTTL, e.clamp = rrsetTTLs([][]dns.RR{m.Answer, m.Ns, m.Extra}, lim)
	}
	if ttl == 0 {
		return nil // RFC 1035 §3.2.1: TTL 0 means use once, never cache
	}
	e.ttl = ttl
	e.expires = e.stored + int64(ttl)*int64(time.Second)
	return e
}

// dnssecOnly reports whether a record of type t exists only for DNSSEC and
// so goes only to DO clients (RFC 4035 §3.2.1), unless it was asked for by
// its type or, in the answer section, by ANY (RFC 3225 §3).
func dnssecOnly(t, qtype uint16) bool {
	switch t {
	case dns.TypeRRSIG, dns.TypeNSEC, dns.TypeNSEC3:
		return t != qtype
	}
	return false
}

func filterRRs(rrs []dns.RR, keep func(dns.RR) bool) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if keep(rr) {
			out = append(out, dns.Copy(rr))
		}
	}
	return out
}

// answers reports whether an answer section answers qname's question of
// type qtype: a record of that type owned by qname or by the end of the
// CNAME chain from it (a DNAME's synthesized CNAME included), rather than
// only the chain leading to a name without one, which is NODATA behind a
// CNAME and negative (RFC 2308 §2.2). qname is lower-case.
func answers(rrs []dns.RR, qname string, qtype uint16) bool {
	name := qname
	for range len(rrs) + 1 { // a chain visits each record at most once
		next := ""
		for _, rr := range rrs {
			h := rr.Header()
			if !strings.EqualFold(h.Name, name) {
				continue
			}
			if h.Rrtype == qtype || qtype == dns.TypeANY {
				return true
			}
			if c, ok := rr.(*dns.CNAME); ok {
				next = strings.ToLower(c.Target)
			}
		}
		if next == "" {
			return false
		}
		name = next
	}
	return false
}

// rrsetTTLs sets every RRset's records in secs to the set's smallest TTL
// (RFC 2181 §5.2: TTLs within an RRset must match; a mismatch is read as the
// minimum), clamped to lim, and returns the entry's lifetime: the smallest
// of them.
func rrsetTTLs(secs [][]dns.RR, lim limits) (ttl, upTTL uint32, clamp string) {
	type set struct {
		name   string
		t, cls uint16
	}
	mins := map[set]uint32{}
	for _, sec := range secs {
		for _, rr := range sec {
			h := rr.Header()
			s := set{strings.ToLower(h.Name), h.Rrtype, h.Class}
			t := fieldTTL(h.Ttl)
			if old, ok := mins[s]; !ok || t < old {
				mins[s] = t
			}
		}
	}
	upTTL = ^uint32(0)
	for _, t := range mins {
		upTTL = min(upTTL, t)
	}
	for _, sec := range secs {
		for _, rr := range sec {
			h := rr.Header()
			h.Ttl = lim.clamp(mins[set{strings.ToLower(h.Name), h.Rrtype, h.Class}])
		}
	}
	ttl, clamp = lim.apply(upTTL)
	return ttl, upTTL, clamp
}

// negativeTTL is RFC 2308 §5: the smaller of the SOA's TTL and its MINIMUM,
// capped (maxNegativeTTL, zoneNegativeTTL), then clamped to lim; the SOA
// record goes out with that TTL so it counts down with the entry. Without
// an SOA the answer is kept only noSOANegativeTTL, cache_min_ttl or not.
func negativeTTL(m *dns.Msg, lim limits, zone bool) (ttl, upTTL uint32, clamp string) {
	var soa *dns.SOA
	for _, rr := range m.Ns {
		if s, ok := rr.(*dns.SOA); ok {
			soa = s
			break
		}
	}
	if soa == nil {
		for _, rr := range m.Ns {
			rr.Header().Ttl = noSOANegativeTTL
		}
		return noSOANegativeTTL, 0, noSOAClamp
	}
	upTTL = min(fieldTTL(soa.Hdr.Ttl), fieldTTL(soa.Minttl))
	capped, why := upTTL, ""
	if c := uint32(maxNegativeTTL); capped > c {
		capped, why = c, negativeCapClamp
	}
	if c := uint32(zoneNegativeTTL); zone && capped > c {
		capped, why = c, zoneNegativeCapClamp
	}
	ttl, clamp = lim.apply(capped)
	if clamp == "" {
		clamp = why
	}
	for _, rr := range m.Ns {
		rr.Header().Ttl = ttl
	}
	return ttl, upTTL, clamp
}

// fieldTTL reads a TTL field per RFC 2181 §8: the top bit set means 0.
func fieldTTL(t uint32) uint32 {
	if t > maxTTLField {
		return 0
	}
	return t
}

// apply clamps t to [min, max]; a 0 stays 0 unless min raises it. The
// string says what changed t, "" for nothing.
func (l limits) apply(t uint32) (uint32, string) {
	switch c := l.clamp(t); {
	case c > t:
		return c, fmt.Sprintf("raised to dns.cache_min_ttl (%d s)", l.min)
	case c < t:
		return c, fmt.Sprintf("lowered to dns.cache_max_ttl (%d s)", l.max)
	}
	return t, ""
}

// clamp is apply's TTL alone, for a record's TTL, whose reason nobody reads.
func (l limits) clamp(t uint32) uint32 {
	switch {
	case t < l.min:
		return l.min
	case t > l.max:
		return l.max
	}
	return t
}
