package history

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/query"
)

// Pre-aggregated buckets (docs/design.md#history): every flush folds its rows into the
// minute they arrived in and into that minute's hour, in the same write
// transaction as the rows, so buckets and rows never disagree. An overview
// reads minute buckets for short ranges and hour buckets for long ones: a
// day is 1440 small minute buckets, a month 720 hour buckets, so a month
// costs about what a day does, and neither touches a raw row.
//
// Hour buckets are rolled up once more into UTC days, for the top lists of
// long ranges only: a month's series and counts come from its 720 hour
// buckets read without their maps, its top lists from 30 day buckets (and
// the hours of the partial days at either end).
//
// The counts by source, rcode, cache outcome, upstream and latency are
// exact. The per-name and per-client maps are capped per bucket (a flood of
// random names must not grow a bucket without bound): past the cap a new
// key's queries are counted in the bucket's Other field, and the overview
// says its top lists are approximate.
const (
	minuteCap = 128  // names, blocked names or clients kept per minute bucket
	hourCap   = 512  // and per hour bucket
	dayCap    = 2048 // and per day bucket (the top lists of long ranges)
	// minuteRetention is how long minute buckets are kept: the overview reads
	// them for ranges up to minuteRange.
	minuteRetention = 3 * 24 * time.Hour
	minuteRange     = 2 * 24 * time.Hour
)

// latencyBoundsMS are the upper bounds of the latency histogram, in
// milliseconds; the last bucket is everything slower.
var latencyBoundsMS = [...]int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}

// Agg is one bucket: what its queries add up to. Field names are short
// JSON keys because buckets are stored as JSON.
type Agg struct {
	Total     int64             `json:"n"`
	DurUS     int64             `json:"d"` // sum of durations, microseconds
	Latency   []int64           `json:"l"` // per latencyBoundsMS bucket, plus one for slower
	Sources   map[string]int64  `json:"s,omitempty"`
	Rcodes    map[string]int64  `json:"r,omitempty"`
	Cache     map[string]int64  `json:"c,omitempty"`
	Upstreams map[string]UpAgg  `json:"u,omitempty"`
	Clients   map[string]int64  `json:"cl,omitempty"` // client address → queries
	Names     map[string]int64  `json:"nm,omitempty"` // query name (lower case) → queries
	Blocked   map[string]int64  `json:"b,omitempty"`  // blocked name → queries
	Other     map[string]int64  `json:"o,omitempty"`  // "clients", "names", "blocked": counts past the cap
	ClientTag map[string]string `json:"ct,omitempty"` // client address → its name, when known

	cap int // of Clients, Names and Blocked; 0 for none (an overview's sum)
}

// UpAgg is one upstream's answers in a bucket.
type UpAgg struct {
	N     int64 `json:"n"`
	DurUS int64 `json:"d"`
}

func newAgg(cap int) *Agg { return &Agg{cap: cap, Latency: make([]int64, len(latencyBoundsMS)+1)} }

// add counts one row.
func (a *Agg) add(r *Row) { a.addInterned(r, nil) }

// addInterned is add with the row's client and name drawn from in.
func (a *Agg) addInterned(r *Row, in *interner) {
	a.Total++
	us := r.Duration.Microseconds()
	a.DurUS += us
	a.Latency[latencyIndex(r.Duration)]++
	incr(&a.Sources, r.Source, 1)
	incr(&a.Rcodes, RcodeName(r.Rcode), 1)
	if r.Cache != "" {
		incr(&a.Cache, r.Cache, 1)
	}
	if r.Upstream != "" {
		if a.Upstreams == nil {
			a.Upstreams = map[string]UpAgg{}
		}
		u := a.Upstreams[r.Upstream]
		u.N++
		u.DurUS += us
		a.Upstreams[r.Upstream] = u
	}
	client := in.client(r.Client)
	if a.capped(&a.Clients, "clients", client, 1) && r.ClientName != "" {
		if a.ClientTag == nil {
			a.ClientTag = map[string]string{}
		}
		a.ClientTag[client] = r.ClientName
	}
	name := in.name(r.Name)
	a.capped(&a.Names, "names", name, 1)
	if r.Source == query.SourceBlocked || r.Filter.Blocked {
		a.capped(&a.Blocked, "blocked", name, 1)
	}
}

// merge adds b into a.
func (a *Agg) merge(b *Agg) {
	a.Total += b.Total
	a.DurUS += b.DurUS
	for i, n := range b.Latency {
		if i < len(a.Latency) {
			a.Latency[i] += n
		}
	}
	for k, n := range b.Sources {
		incr(&a.Sources, k, n)
	}
	for k, n := range b.Rcodes {
		incr(&a.Rcodes, k, n)
	}
	for k, n := range b.Cache {
		incr(&a.Cache, k, n)
	}
	for k, u := range b.Upstreams {
		if a.Upstreams == nil {
			a.Upstreams = map[string]UpAgg{}
		}
		v := a.Upstreams[k]
		v.N += u.N
		v.DurUS += u.DurUS
		a.Upstreams[k] = v
	}
	a.mergeTops(b)
}

// mergeTops adds only b's per-key maps (and their overflow) into a.
func (a *Agg) mergeTops(b *Agg) {
	for k, n := range b.Clients {
		a.capped(&a.Clients, "clients", k, n)
	}
	for k, t := range b.ClientTag {
		if a.ClientTag == nil {
			a.ClientTag = map[string]string{}
		}
		a.ClientTag[k] = t
	}
	for k, n := range b.Names {
		a.capped(&a.Names, "names", k, n)
	}
	for k, n := range b.Blocked {
		a.capped(&a.Blocked, "blocked", k, n)
	}
	for k, n := range b.Other {
		incr(&a.Other, k, n)
	}
}

// capped counts n for key in *m unless m is full and key new, in which case
// it counts them as Other[kind]. It reports whether key is in m.
func (a *Agg) capped(m *map[string]int64, kind, key string, n int64) bool {
	if _, ok := (*m)[key]; !ok && a.cap > 0 && len(*m) >= a.cap {
		incr(&a.Other, kind, n)
		return false
	}
	incr(m, key, n)
	return true
}

func incr(m *map[string]int64, k string, n int64) {
	if *m == nil {
		*m = map[string]int64{}
	}
	(*m)[k] += n
}

// normName is a name as the buckets and searches compare it: lower case,
// without the root's trailing dot.
func normName(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, "."))
}

func latencyIndex(d time.Duration) int {
	ms := d.Milliseconds()
	for i, b := range latencyBoundsMS {
		if ms < b {
			return i
		}
	}
	return len(latencyBoundsMS)
}

// bucketKey is the key of the bucket starting at t (unix seconds,
// big-endian).
func bucketKey(t time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(max(t.Unix(), 0)))
}

func bucketTime(k []byte) time.Time {
	if len(k) != 8 {
		return time.Time{}
	}
	return time.Unix(int64(binary.BigEndian.Uint64(k)), 0)
}
