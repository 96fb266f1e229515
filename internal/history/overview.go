package history

import (
	"cmp"
	"slices"
	"time"

	"github.com/nxdns/nxdns/internal/query"
)

// Overview bounds.
const (
	DefaultTop = 10
	MaxTop     = 100
	// maxPoints bounds the series: consecutive buckets are merged into steps
	// so that a month is as many points as a day.
	maxPoints = 240
)

// Overview is what the dashboard's first page shows for a time range,
// computed from the buckets (and the buffered events), never from raw rows.
type Overview struct {
	From, To     time.Time // the range, rounded out to whole buckets
	Resolution   time.Duration
	Step         time.Duration // of the series
	Total        int64
	Blocked      int64
	BlockedShare float64 // Blocked / Total; 0 without queries
	CacheHits    int64   // answered from the cache, fresh or stale
	CacheLookups int64   // queries the cache saw
	CacheHitRate float64 // CacheHits / CacheLookups; 0 without lookups
	MeanMS       float64
	Sources      map[string]int64
	Rcodes       map[string]int64
	Latency      []LatencyBin
	Series       []Point
	TopClients   []Top
	TopDomains   []Top
	TopBlocked   []Top
	Upstreams    []UpstreamUse
	// Approximate says a top list may be off: some bucket saw more distinct
	// names or clients than it keeps (agg.go).
	Approximate bool
}

// LatencyBin is one bar of the latency histogram: queries answered in less
// than LtMS milliseconds and at least the previous bin's bound; LtMS 0 is
// the open last bin.
type LatencyBin struct {
	LtMS  int64
	Count int64
}

// Point is one step of the series.
type Point struct {
	Time      time.Time
	Total     int64
	Blocked   int64
	CacheHits int64
	MeanMS    float64
}

// Top is one entry of a top list.
type Top struct {
	Key   string // the name, or the client's address
	Label string // the client's name, when known
	Count int64
}

// UpstreamUse is an upstream's share of the answers in the range.
type UpstreamUse struct {
	Upstream string
	Answers  int64
	MeanMS   float64
}

// Overview sums the buckets of [from, to): minute buckets for ranges up to
// two days within the minute buckets' retention, hour buckets otherwise.
// top bounds the top lists. It includes the events not yet flushed, decoded
// anew at each call.
func (h *History) Overview(from, to time.Time, top int) (Overview, error) {
	return h.overview(from, to, top, true)
}

// OverviewFlushed is Overview without the events not yet flushed: at most
// one flush interval behind, and its cost does not grow with the query
// rate. For a periodic publisher (the MQTT sensors): Overview decodes every
// buffered event at every call, so a publisher calling it every few seconds
// would decode each query several times, off the query path but on the
// same CPU (docs/performance.md, "MQTT's cost").
func (h *History) OverviewFlushed(from, to time.Time, top int) (Overview, error) {
	return h.overview(from, to, top, false)
}

func (h *History) overview(from, to time.Time, top int, withBuffered bool) (Overview, error) {
	top = min(max(top, 1), MaxTop)
	res, cap := time.Minute, minuteCap
	if to.Sub(from) > minuteRange || from.Before(h.opts.Now().Add(-minuteRetention+time.Hour)) {
		res, cap = time.Hour, hourCap
	}
	from = from.Truncate(res)
	if t := to.Truncate(res); t.Before(to) {
		to = t.Add(res)
	}
	var buckets, days []bucketAt
	err := h.view(func(tx kvTx) error {
		if res == time.Minute {
			buckets = readBuckets(tx, bucketMinute, minuteCap, from, to, nil)
			return nil
		}
		buckets, days = readLongRange(tx, from, to)
		return nil
	})
	if err != nil {
		return Overview{}, err
	}
	if withBuffered {
		buckets = mergeBuckets(buckets, h.bufferedBuckets(from, to, res, cap))
	}
	return summarize(from, to, res, buckets, days, top), nil
}

// readBuckets decodes the buckets of one level in [from, to); countsOnly
// (nil for none) says which to read without their maps.
func readBuckets(tx kvTx, name []byte, cap int, from, to time.Time, countsOnly func(time.Time) bool) []bucketAt {
	var out []bucketAt
	c := tx.bucket(name).cursor()
	for k, v := c.Seek(bucketKey(from)); k != nil && bucketTime(k).Before(to); k, v = c.Next() {
		t := bucketTime(k)
		a, err := decodeAgg(v, cap, countsOnly != nil && countsOnly(t))
		if err != nil {
			continue // a damaged bucket costs itself
		}
		out = append(out, bucketAt{t, a})
	}
	return out
}

// readLongRange reads a range at hour resolution: the hour buckets (the
// hours of days that have a day bucket without their maps), those days'
// buckets for the top lists, and, for the hours not rolled up yet (the
// current one, usually; after a clock step, any hour without its bucket),
// their minute buckets summed per hour.
func readLongRange(tx kvTx, from, to time.Time) (hours, days []bucketAt) {
	days = readBuckets(tx, bucketDay, dayCap, from.Add(day-1).Truncate(day), to.Truncate(day), nil)
	rolled := map[int64]bool{}
	for _, d := range days {
		rolled[d.t.Unix()] = true
	}
	hours = readBuckets(tx, bucketHour, hourCap, from, to, func(t time.Time) bool { return rolled[t.Truncate(day).Unix()] })
	hourly := map[int64]bool{}
	for _, h := range hours {
		hourly[h.t.Unix()] = true
	}
	perHour := map[int64]*Agg{}
	c := tx.bucket(bucketMinute).cursor()
	for k, v := c.Seek(bucketKey(from)); k != nil && bucketTime(k).Before(to); k, v = c.Next() {
		t := bucketTime(k).Truncate(time.Hour).Unix()
		if hourly[t] {
			continue // in its hour bucket
		}
		a, err := decodeAgg(v, minuteCap, false)
		if err != nil {
			continue // a damaged bucket costs itself
		}
		if perHour[t] == nil {
			perHour[t] = newAgg(hourCap)
		}
		perHour[t].merge(a)
	}
	for t, a := range perHour {
		hours = append(hours, bucketAt{time.Unix(t, 0), a})
	}
	return hours, days
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

type bucketAt struct {
	t time.Time
	a *Agg
}

// bufferedBuckets aggregates the events not yet flushed, so the overview
// counts the queries of the last interval too.
func (h *History) bufferedBuckets(from, to time.Time, res time.Duration, cap int) []bucketAt {
	m := map[int64]*Agg{}
	in := newInterner() // up to a flush interval's events, repeating a few names and clients
	for _, set := range h.buffered() {
		for _, b := range set {
			if t := keyTime(b.key); t.Before(from) || !t.Before(to) {
				continue
			}
			row, err := decodeRowInterned(b.key, b.val, in)
			if err != nil {
				continue
			}
			t := row.Time.Truncate(res).Unix()
			if m[t] == nil {
				m[t] = newAgg(cap)
			}
			m[t].addInterned(&row, in)
		}
	}
	out := make([]bucketAt, 0, len(m))
	for t, a := range m {
		out = append(out, bucketAt{time.Unix(t, 0), a})
	}
	return out
}

// mergeBuckets adds the buffered buckets into the stored ones, by time. A
// batch being flushed may be counted twice for the instant between its
// commit and the flusher forgetting it; the next request is exact again.
func mergeBuckets(stored, buffered []bucketAt) []bucketAt {
	idx := map[int64]int{}
	for i, b := range stored {
		idx[b.t.Unix()] = i
	}
	for _, b := range buffered {
		if i, ok := idx[b.t.Unix()]; ok {
			stored[i].a.merge(b.a)
			continue
		}
		stored = append(stored, b)
	}
	slices.SortFunc(stored, func(x, y bucketAt) int { return x.t.Compare(y.t) })
	return stored
}

// summarize adds the buckets up; days add only their top-list maps (their
// counts are in the hour buckets already).
func summarize(from, to time.Time, res time.Duration, buckets, days []bucketAt, top int) Overview {
	o := Overview{From: from, To: to, Resolution: res}
	n := int64(to.Sub(from) / res)
	stepBuckets := max(1, (n+maxPoints-1)/maxPoints)
	o.Step = time.Duration(stepBuckets) * res
	sum := newAgg(0)
	points := map[int64]*Point{}
	var pointDur = map[int64]int64{}
	for _, b := range buckets {
		sum.merge(b.a)
		st := from.Add(b.t.Sub(from) / o.Step * o.Step).Unix()
		p := points[st]
		if p == nil {
			p = &Point{Time: time.Unix(st, 0).UTC()}
			points[st] = p
		}
		p.Total += b.a.Total
		p.Blocked += b.a.Sources[query.SourceBlocked]
		p.CacheHits += b.a.Sources[query.SourceCache] + b.a.Sources[query.SourceStale]
		pointDur[st] += b.a.DurUS
	}
	// Every step of the range, empty ones included: a chart needs the gaps.
	for t := from; t.Before(to); t = t.Add(o.Step) {
		p := points[t.Unix()]
		if p == nil {
			p = &Point{Time: t.UTC()}
		} else if p.Total > 0 {
			p.MeanMS = float64(pointDur[t.Unix()]) / float64(p.Total) / 1000
		}
		o.Series = append(o.Series, *p)
	}
	for _, d := range days {
		sum.mergeTops(d.a)
	}
	o.Total = sum.Total
	o.Blocked = sum.Sources[query.SourceBlocked]
	o.CacheHits = sum.Cache[query.CacheHit] + sum.Cache[query.CacheStale]
	for _, n := range sum.Cache {
		o.CacheLookups += n
	}
	if o.Total > 0 {
		o.BlockedShare = float64(o.Blocked) / float64(o.Total)
		o.MeanMS = float64(sum.DurUS) / float64(o.Total) / 1000
	}
	if o.CacheLookups > 0 {
		o.CacheHitRate = float64(o.CacheHits) / float64(o.CacheLookups)
	}
	o.Sources, o.Rcodes = orEmpty(sum.Sources), orEmpty(sum.Rcodes)
	for i, c := range sum.Latency {
		var lt int64
		if i < len(latencyBoundsMS) {
			lt = latencyBoundsMS[i]
		}
		o.Latency = append(o.Latency, LatencyBin{LtMS: lt, Count: c})
	}
	o.TopClients = topOf(sum.Clients, top, sum.ClientTag)
	o.TopDomains = topOf(sum.Names, top, nil)
	o.TopBlocked = topOf(sum.Blocked, top, nil)
	for u, a := range sum.Upstreams {
		use := UpstreamUse{Upstream: u, Answers: a.N}
		if a.N > 0 {
			use.MeanMS = float64(a.DurUS) / float64(a.N) / 1000
		}
		o.Upstreams = append(o.Upstreams, use)
	}
	slices.SortFunc(o.Upstreams, func(a, b UpstreamUse) int {
		return cmp.Or(cmp.Compare(b.Answers, a.Answers), cmp.Compare(a.Upstream, b.Upstream))
	})
	o.Approximate = len(sum.Other) > 0
	return o
}

func orEmpty(m map[string]int64) map[string]int64 {
	if m == nil {
		return map[string]int64{}
	}
	return m
}

// topOf is the n largest counts, ties by key so the order is stable.
func topOf(m map[string]int64, n int, labels map[string]string) []Top {
	out := make([]Top, 0, len(m))
	for k, c := range m {
		out = append(out, Top{Key: k, Label: labels[k], Count: c})
	}
	slices.SortFunc(out, func(a, b Top) int { return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key)) })
	return out[:min(n, len(out))]
}
