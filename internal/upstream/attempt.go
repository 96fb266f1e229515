package upstream

import (
	"context"
	"time"

	"github.com/miekg/dns"
)

// attempt runs one exchange against e, whose slot the caller (qs) holds; the slot
// is released before it returns. The attempt races the query's deadline
// (docs/design.md#pool-deadline): it runs until min(now+limit, deadline), limit being
// attempt_timeout or, when every upstream is down, a share of one probe
// timeout (attemptLimit), and the context's cause says which timer ended it.
//
// The error, if any, names the upstream only when an exchange started: a
// deadline already passed returns KindBudgetExhausted without calling the
// client, so an instant exchange cannot manufacture evidence after the
// budget is gone; a client already gone likewise starts nothing.
func (p *Pool) attempt(ctx context.Context, deadline time.Time, e *entry, qs *query, q *dns.Msg, limit time.Duration) (*dns.Msg, *AttemptError) {
	defer p.release(e, qs)
	now := time.Now()
	if !now.Before(deadline) { // ctx.Done lags the clock by a timer tick
		return nil, &AttemptError{Kind: KindBudgetExhausted, Err: context.DeadlineExceeded}
	}
	if err := ctx.Err(); err != nil {
		return nil, &AttemptError{Kind: causeKind(ctx), Err: err}
	}
	expiry := now.Add(limit)
	// Truncated means the upstream gets less than its configured interval;
	// an attempt ending exactly at the deadline got all of it.
	truncated := expiry.After(deadline)
	var cancel context.CancelFunc
	if expiry.Before(deadline) {
		ctx, cancel = context.WithDeadlineCause(ctx, expiry, KindAttemptExpired)
	} else {
		// No second timer at the budget's instant: the budget's own timer ends
		// this attempt, and its cause (KindBudgetExhausted) says so.
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel() // sets no cause: classify before it runs

	e.inFlight.Add(1)
	resp, err := e.client.Exchange(ctx, q.Copy()) // a copy per attempt: the client may keep it
	e.inFlight.Add(-1)
	e.latency.Observe(time.Since(now))
	if err != nil {
		k := KindOf(ctx, err)
		if k == KindBudgetExhausted && !truncated {
			// The budget's timer fired at the instant the attempt's own would
			// have: the upstream had its full interval, so this is the full
			// expiry row of docs/design.md#pool-classification, evidence about the peer.
			k = KindAttemptExpired
		}
		return nil, newAttemptError(e.url, k, err)
	}
	return resp, nil
}
