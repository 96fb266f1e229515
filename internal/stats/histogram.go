// Package stats holds the lock-free latency histogram that the pool and the
// server record into and the metrics collectors read at scrape time, so each
// number is kept once (no double bookkeeping between a component and
// Prometheus).
package stats

import (
	"math"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds, in seconds, of every latency
// histogram: sub-millisecond (a cached or LAN answer) up to the 5 s default
// query budget, roughly doubling so each bucket stays informative.
var LatencyBuckets = []float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
}

// Histogram counts durations into LatencyBuckets. Observe is safe for
// concurrent use and never blocks; a Snapshot taken while observations run
// may be off by the observations in flight, which Prometheus tolerates.
type Histogram struct {
	counts [14]atomic.Uint64 // len(LatencyBuckets)+1: one per bucket, +Inf last
	sumNS  atomic.Int64      // total observed time in nanoseconds
	total  atomic.Uint64
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	i := len(LatencyBuckets) // +Inf
	for j, ub := range LatencyBuckets {
		if s <= ub {
			i = j
			break
		}
	}
	h.counts[i].Add(1)
	h.sumNS.Add(int64(d))
	h.total.Add(1)
}

// HistogramSnapshot is a point-in-time copy in Prometheus's shape.
type HistogramSnapshot struct {
	Count   uint64
	Sum     float64            // seconds
	Buckets map[float64]uint64 // upper bound → cumulative count
}

// Snapshot returns cumulative bucket counts, as Prometheus const histograms
// want them.
func (h *Histogram) Snapshot() HistogramSnapshot {
	s := HistogramSnapshot{Buckets: make(map[float64]uint64, len(LatencyBuckets))}
	var cum uint64
	for i, ub := range LatencyBuckets {
		cum += h.counts[i].Load()
		s.Buckets[ub] = cum
	}
	cum += h.counts[len(LatencyBuckets)].Load()
	s.Count = cum
	s.Sum = float64(h.sumNS.Load()) / float64(time.Second)
	if math.IsNaN(s.Sum) {
		s.Sum = 0
	}
	return s
}
