package upstream

import (
	"time"

	"github.com/nxdns/nxdns/internal/stats"
)

// Snapshot is the pool's counters at one moment, read by the metrics
// collectors at scrape time (docs/design.md#metrics), so each number is kept once.
type Snapshot struct {
	Upstreams       []UpstreamSnapshot // in priority order
	BudgetExhausted uint64             // queries that ended in BudgetExhausted; pool-wide, no upstream
}

// UpstreamSnapshot is one entry's counters. Each is read atomically on its
// own; together they may be off by the queries in flight, as a scrape
// tolerates.
type UpstreamSnapshot struct {
	Index           int     // position in the members given to New
	URL             string  // redacted
	Slots           int     // compiled concurrency (DefaultSlots)
	InFlight        int64   // exchanges running now
	QueuedTotal     uint64  // blocking admissions that ended on this entry (slot, expiry or cancellation)
	QueuedSeconds   float64 // their total length, sampled at admission
	Successes       uint64  // attempts recorded as health successes
	Failures        uint64  // attempts recorded as health failures (probes excluded)
	ProbeSuccesses  uint64  // background probes that succeeded
	ProbeFailures   uint64  // background probes that failed
	InBackoff       bool
	BackoffEpisodes uint64 // times it entered backoff
	ReuseRecoveries uint64 // stale-connection retries the client absorbed (docs/design.md#stale-connection)
	Dials           Dials  // connections the client dialed, by outcome (docs/design.md#dot-client)
	AttemptLatency  stats.HistogramSnapshot
}

// reuseRecoverer is implemented by clients that retry a stale reused
// connection (the DoT client).
type reuseRecoverer interface{ ReuseRecoveries() uint64 }

// dialer is implemented by clients that count their connections (DoT, DoH).
type dialer interface{ Dials() Dials }

// Snapshot returns the counters of every entry and of the pool.
func (p *Pool) Snapshot() Snapshot {
	s := Snapshot{
		Upstreams:       make([]UpstreamSnapshot, len(p.entries)),
		BudgetExhausted: p.exhausted.Load(),
	}
	for i, e := range p.entries {
		u := UpstreamSnapshot{
			Index:           e.index,
			URL:             e.url,
			Slots:           e.slots,
			InFlight:        e.inFlight.Load(),
			QueuedTotal:     e.queued.Load(),
			QueuedSeconds:   time.Duration(e.queuedNanos.Load()).Seconds(),
			Successes:       e.successes.Load(),
			Failures:        e.failures.Load(),
			ProbeSuccesses:  e.probeOK.Load(),
			ProbeFailures:   e.probeFailed.Load(),
			InBackoff:       e.health.backoff.Load(),
			BackoffEpisodes: e.backoffs.Load(),
			AttemptLatency:  e.latency.Snapshot(),
		}
		if r, ok := e.client.(reuseRecoverer); ok {
			u.ReuseRecoveries = r.ReuseRecoveries()
		}
		if d, ok := e.client.(dialer); ok {
			u.Dials = d.Dials()
		}
		s.Upstreams[i] = u
	}
	return s
}
