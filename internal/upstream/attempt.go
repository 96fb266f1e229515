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
// timeout (attemptLimit). One context carries that instant, and its cause
// says which bound it is: KindAttemptExpired for the attempt's own expiry,
// KindBudgetExhausted when the deadline comes first (the attempt is
// truncated). The pool holds no context of its own over it, so the timer
// that ends the attempt is the only one armed for it.
//
// The error, if any, names the upstream only when an exchange started: a
// deadline already passed, or an all-down pass already over (limit ≤ 0),
// returns KindBudgetExhausted without calling the client, so an instant
// exchange cannot manufacture evidence after the budget is gone; a client
// already gone likewise starts nothing.
func (p *Pool) attempt(ctx context.Context, deadline time.Time, e *entry, qs *query, q *dns.Msg, limit time.Duration) (*dns.Msg, *AttemptError) {
	defer p.release(e, qs)
	now := time.Now()
	if !now.Before(deadline) || limit <= 0 {
		return nil, &AttemptError{Kind: KindBudgetExhausted, Err: context.DeadlineExceeded}
	}
	if err := ctx.Err(); err != nil {
		return nil, &AttemptError{Kind: causeKind(ctx), Err: err}
	}
	expiry := now.Add(limit)
	// Truncated means the upstream gets less than its configured interval;
	// an attempt ending exactly at the deadline got all of it, and its
	// expiry is evidence about the peer (docs/design.md#pool-classification).
	end, cause := expiry, KindAttemptExpired
	if expiry.After(deadline) {
		end, cause = deadline, KindBudgetExhausted
	}
	ctx, cancel := context.WithDeadlineCause(ctx, end, cause)
	defer cancel() // sets no cause: classify before it runs

	e.inFlight.Add(1)
	resp, err := e.client.Exchange(ctx, q) // no copy: the client keeps none of it (Client)
	e.inFlight.Add(-1)
	e.latency.Observe(time.Since(now))
	if err != nil {
		return nil, newAttemptError(e.url, KindOf(ctx, err), err)
	}
	return resp, nil
}
