package upstream

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/sleep"
)

// Probes keep users from paying for a dead upstream twice (docs/design.md#pool-probes). Each
// entry has one prober goroutine, so probes of one entry never overlap. A
// probe calls the client directly: it never takes a serving slot, so it
// cannot queue behind live queries nor make them queue behind it.

// probeTimeout bounds one probe. It is shorter than any attempt budget: a
// probe asks the root NS set, which a serving resolver has cached, so an
// upstream that needs more than a second for it is not one to send users to.
const probeTimeout = time.Second

// verifyQuiet is how long a verification probe that found the upstream
// serving stands for it: refused queries within it ask for no new probe, so
// a client sending nothing but queries an upstream refuses costs that
// upstream at most one `. NS` per interval. A failed verification leaves no
// quiet: the next refused query probes again, so an upstream that refuses
// everything reaches backoff after backoffThreshold of them.
const verifyQuiet = backoffFirst

// probeLoop probes e once at start (a failure starts it in backoff), then
// waits for each backoff episode and probes on the jittered schedule until
// the entry is back, and probes a serving entry once when a refused query
// asks (askVerify), until ctx ends.
func (p *Pool) probeLoop(ctx context.Context, e *entry) {
	switch err := p.countedProbe(ctx, e); {
	case err == nil:
		p.recordSuccess(e)
		p.announceServing(e)
	case err.Kind.Group() == Cancellation:
		return
	default:
		p.recordFailure(e, err, true)
	}
	var quietUntil time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.health.verify:
			if e.health.backoff.Load() || time.Now().Before(quietUntil) {
				continue // the backoff probes decide, or a probe just did
			}
			switch err := p.countedProbe(ctx, e); {
			case err == nil:
				p.recordSuccess(e)
				quietUntil = time.Now().Add(verifyQuiet)
			case err.Kind.Group() == Cancellation:
				return
			default:
				p.recordFailure(e, err, false) // may begin an episode: kick is then pending
			}
		case <-e.health.kick:
			if !p.probeUntilBack(ctx, e) {
				return
			}
		}
	}
}

// probeUntilBack probes e while it is in backoff, waiting backoffInterval
// before each probe. It reports false when ctx ended.
func (p *Pool) probeUntilBack(ctx context.Context, e *entry) bool {
	for step := 0; e.health.backoff.Load(); step++ {
		if !sleep.For(ctx, backoffInterval(step, rand.Float64())) {
			return false
		}
		switch err := p.countedProbe(ctx, e); {
		case err == nil:
			p.recordSuccess(e)
		case err.Kind.Group() == Cancellation:
			return false
		default:
			p.recordFailure(e, err, false)
		}
	}
	return true
}

// countedProbe is probe with its outcome counted for the metrics, so an
// upstream put in backoff by its start-up probe shows why on /metrics
// (the attempt counters exclude probes).
func (p *Pool) countedProbe(ctx context.Context, e *entry) *AttemptError {
	err := p.probe(ctx, e)
	switch {
	case err == nil:
		e.probeOK.Add(1)
	case err.Kind.Group() != Cancellation:
		e.probeFailed.Add(1)
	}
	return err
}

// probe sends `. IN NS` with RD set through e's client, bounded by
// probeTimeout. Success is a valid response to it whose rcode is not REFUSED
// or NOTIMP: any other rcode shows the upstream reachable and serving.
func (p *Pool) probe(ctx context.Context, e *entry) *AttemptError {
	ctx, cancel := context.WithTimeoutCause(ctx, probeTimeout, KindAttemptExpired)
	defer cancel()
	q := new(dns.Msg)
	q.SetQuestion(".", dns.TypeNS) // sets RD and a random ID
	resp, err := e.client.Exchange(ctx, q)
	if err != nil {
		return newAttemptError(e.url, KindOf(ctx, err), err)
	}
	if err := Validate(q, resp); err != nil {
		return newAttemptError(e.url, Classify(err), err)
	}
	if resp.Rcode == dns.RcodeRefused || resp.Rcode == dns.RcodeNotImplemented {
		return &AttemptError{Upstream: e.url, Kind: KindRcode, Err: rcodeError(resp.Rcode)}
	}
	return nil
}
