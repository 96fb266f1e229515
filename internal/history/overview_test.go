package history

import (
	"context"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// fillMonth records n events spread over 30 days from t0, with mixed
// sources, rcodes, clients and upstreams, flushing once per simulated hour.
func fillMonth(t testing.TB, h *History, c *clock, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	span := 30 * 24 * time.Hour
	step := span / time.Duration(n)
	sources := []string{query.SourcePool, query.SourcePool, query.SourceCache, query.SourceBlocked, query.SourceLocal, "zone:lan"}
	rcodes := []int{dns.RcodeSuccess, dns.RcodeSuccess, dns.RcodeNameError, dns.RcodeServerFailure}
	lastFlush := t0
	for i := range n {
		at := t0.Add(time.Duration(i) * step)
		e := event(at, rng.IntN(200))
		e.Source = sources[rng.IntN(len(sources))]
		e.Rcode = rcodes[rng.IntN(len(rcodes))]
		e.Duration = time.Duration(rng.IntN(3000)) * time.Millisecond / 10
		switch e.Source {
		case query.SourcePool:
			e.Upstream = []string{"tls://192.0.2.53:853", "https://192.0.2.54/dns-query"}[rng.IntN(2)]
			e.Cache = query.CacheMiss
		case query.SourceCache:
			e.Upstream, e.Tried, e.Cache = "", nil, query.CacheHit
		default:
			e.Upstream, e.Tried, e.Cache = "", nil, ""
		}
		h.Record(e)
		if at.Sub(lastFlush) >= time.Hour {
			c.now = at
			h.Flush()
			lastFlush = at
		}
	}
	c.now = t0.Add(span)
	h.Flush()
}

// sumRows aggregates raw rows read back through Search, newest first.
func sumRows(t *testing.T, h *History, from, to time.Time) *Agg {
	t.Helper()
	sum := newAgg(0)
	f := Filter{From: from, To: to, Limit: MaxLimit}
	for {
		p, err := h.Search(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Rows {
			sum.add(&p.Rows[i])
		}
		if p.Next == "" {
			return sum
		}
		f.Before = p.Next
	}
}

func TestOverview_monthEqualsTheSumOfItsRawRows(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, filePath(t), c, func(o *Options) { o.MaxAge = 40 * 24 * time.Hour })
	const n = 20_000
	fillMonth(t, h, c, n)
	for _, tc := range []struct {
		name     string
		from, to time.Time
		res      time.Duration
	}{
		{"30 days, hour buckets", t0, t0.Add(30 * 24 * time.Hour), time.Hour},
		{"the last day, minute buckets", t0.Add(29 * 24 * time.Hour), t0.Add(30 * 24 * time.Hour), time.Minute},
		{"an old day, hour buckets", t0.Add(24 * time.Hour), t0.Add(48 * time.Hour), time.Hour},
		{"six hours, minute buckets", t0.Add(29*24*time.Hour + 3*time.Hour), t0.Add(29*24*time.Hour + 9*time.Hour), time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := h.Overview(tc.from, tc.to, MaxTop)
			if err != nil {
				t.Fatal(err)
			}
			if o.Resolution != tc.res {
				t.Errorf("resolution %v, want %v", o.Resolution, tc.res)
			}
			raw := sumRows(t, h, tc.from, tc.to)
			if tc.name == "30 days, hour buckets" && raw.Total != n {
				t.Fatalf("raw rows %d, want %d", raw.Total, n)
			}
			if o.Total != raw.Total || o.Blocked != raw.Sources[query.SourceBlocked] {
				t.Errorf("total %d blocked %d, raw %d %d", o.Total, o.Blocked, raw.Total, raw.Sources[query.SourceBlocked])
			}
			if !maps.Equal(o.Sources, raw.Sources) || !maps.Equal(o.Rcodes, raw.Rcodes) {
				t.Errorf("sources %v rcodes %v\nraw %v %v", o.Sources, o.Rcodes, raw.Sources, raw.Rcodes)
			}
			var lat []int64
			var series int64
			for _, b := range o.Latency {
				lat = append(lat, b.Count)
			}
			for _, p := range o.Series {
				series += p.Total
			}
			if !reflect.DeepEqual(lat, raw.Latency) || series != raw.Total {
				t.Errorf("latency %v series %d, raw %v %d", lat, series, raw.Latency, raw.Total)
			}
			if want := topOf(raw.Clients, MaxTop, raw.ClientTag); !reflect.DeepEqual(o.TopClients, want) {
				t.Errorf("clients %v\nraw %v", o.TopClients, want)
			}
			if want := topOf(raw.Names, MaxTop, nil); !reflect.DeepEqual(o.TopDomains, want) || o.Approximate {
				t.Errorf("approximate %v domains %v\nraw %v", o.Approximate, o.TopDomains, want)
			}
			if want := topOf(raw.Blocked, MaxTop, nil); !reflect.DeepEqual(o.TopBlocked, want) {
				t.Errorf("blocked %v\nraw %v", o.TopBlocked, want)
			}
			for _, u := range o.Upstreams {
				if r := raw.Upstreams[u.Upstream]; r.N != u.Answers {
					t.Errorf("upstream %s: %d answers, raw %d", u.Upstream, u.Answers, r.N)
				}
			}
			if len(o.Upstreams) != len(raw.Upstreams) {
				t.Errorf("%d upstreams, raw %d", len(o.Upstreams), len(raw.Upstreams))
			}
			if len(o.Series) > maxPoints {
				t.Errorf("%d points", len(o.Series))
			}
		})
	}
}

// TestOverview_countsBufferedEvents: a query is in the overview before its
// flush.
func TestOverview_countsBufferedEvents(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, "", c, nil)
	h.Record(event(t0, 1))
	h.Flush()
	h.Record(event(t0.Add(time.Second), 2))
	o, err := h.Overview(t0.Add(-time.Hour), t0.Add(time.Hour), 10)
	if err != nil || o.Total != 2 {
		t.Fatalf("total %d (%v), want 2: one stored, one buffered", o.Total, err)
	}
}

// TestOverviewFlushed_leavesOutBufferedEventsUntilTheirFlush: the
// periodic publisher's view is the stored buckets only; a query reaches it
// at its flush.
func TestOverviewFlushed_leavesOutBufferedEventsUntilTheirFlush(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, "", c, nil)
	h.Record(event(t0, 1))
	h.Flush()
	h.Record(event(t0.Add(time.Second), 2))
	from, to := t0.Add(-time.Hour), t0.Add(time.Hour)
	if o, err := h.OverviewFlushed(from, to, 10); err != nil || o.Total != 1 {
		t.Fatalf("total %d (%v), want 1: the stored one only", o.Total, err)
	}
	h.Flush()
	if o, err := h.OverviewFlushed(from, to, 10); err != nil || o.Total != 2 {
		t.Fatalf("total %d (%v) after the flush, want 2", o.Total, err)
	}
}

// TestOverview_lateQueryReachesItsRolledUpDay: a query that arrived before
// midnight but was flushed after the day was rolled up still counts in the
// day's top lists.
func TestOverview_lateQueryReachesItsRolledUpDay(t *testing.T) {
	d := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	c := &clock{now: d.Add(-time.Minute)}
	h := openTest(t, filePath(t), c, nil)
	h.Record(event(d.Add(-time.Second), 1))
	h.Flush()
	c.now = d.Add(30 * time.Second)
	h.Flush() // the day before d ended: rolled up now
	h.Record(event(d.Add(-2*time.Second), 1))
	h.Flush()
	c.now = d.Add(2 * 24 * time.Hour)
	o, err := h.Overview(d.Add(-2*24*time.Hour), d.Add(24*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if o.Total != 2 || len(o.TopDomains) != 1 || o.TopDomains[0].Count != 2 {
		t.Fatalf("total %d, top domains %+v: want both queries in the day's top list", o.Total, o.TopDomains)
	}
}

// TestRollUp_clockSteppedBackAndForwardKeepsEveryRollUp: a clock stepped
// back two days and then forward again still gets every hour and day
// rolled up, and the week's overview counts every query (issue 30 item
// 16: the roll-ups started after the newest hour bucket, so after a step
// back none of the 1 200 queries reached the week overview).
func TestRollUp_clockSteppedBackAndForwardKeepsEveryRollUp(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, filePath(t), c, nil)
	record := func(n int) {
		for i := range n {
			h.Record(event(c.now, i))
		}
		h.Flush()
	}
	for i := range 4 { // before the step: 100 queries in each of the 4 hours up to t0
		c.now = t0.Add(time.Duration(i-3)*time.Hour + 30*time.Minute)
		record(100)
	}
	c.now = t0.Add(time.Hour + 5*time.Minute)
	h.Flush()

	back := t0.Add(-2 * day) // the step back: 6 hours of 200 queries
	for i := range 6 * 4 {
		c.now = back.Add(time.Duration(i) * 15 * time.Minute)
		record(50)
	}
	c.now = t0.Add(12 * time.Hour) // and forward again
	h.Flush()

	want := map[string]map[time.Time]int64{"hour": {}, "day": {back.Truncate(day): 1200, t0.Truncate(day): 400}}
	for i := range 6 {
		want["hour"][back.Add(time.Duration(i)*time.Hour)] = 200
	}
	for i := range 4 {
		want["hour"][t0.Add(time.Duration(i-3)*time.Hour)] = 100
	}
	err := h.view(func(tx kvTx) error {
		for level, buckets := range want {
			for at, n := range buckets {
				v := tx.bucket([]byte(level)).get(bucketKey(at))
				if v == nil {
					t.Errorf("no %s bucket for %v", level, at)
					continue
				}
				if a, err := decodeAgg(v, 0, true); err != nil || a.Total != n {
					t.Errorf("%s bucket %v: total %d (%v), want %d", level, at, a.Total, err, n)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.Overview(c.now.Add(-7*day), c.now, 10)
	if err != nil || o.Total != 1600 || o.Resolution != time.Hour {
		t.Errorf("week overview: total %d at %v (%v), want 1600 at hour resolution", o.Total, o.Resolution, err)
	}
}
