package fakeup

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// AnswerFunc answers one query in place of the synthetic answers. ctx ends
// when the query's connection or the server closes, so a function that
// blocks must select on it. A nil answer sends nothing: the query stalls
// (DoT, TCP: no answer on the connection; DoH: the request waits until the
// client or the server gives up).
type AnswerFunc func(ctx context.Context, q *dns.Msg) *dns.Msg

// Hooks drive one listener at run time from a Go test: an answer function,
// one-shot faults and a delay that can change while the server runs. The
// test utilities' DoT and DoH servers (internal/testutil) are fakeup
// listeners with Hooks, so the transport tests and the scenario tests share
// one fake upstream. A listener without Hooks behaves as its Behaviour says.
type Hooks struct {
	Answer  AnswerFunc // nil: the synthetic answers
	AnyPath bool       // DoH: answer on every URL path (a test may put a token in it)

	faults faultQueue
	delay  atomic.Int64 // nanoseconds before each answer, on top of Behaviour
}

// FailNext makes the next query read by the listener, on any connection,
// suffer f. Calls queue: each fault applies to one query, in order.
func (h *Hooks) FailNext(f Fault) { h.faults.push(f) }

// SetDelay makes every later answer wait d (0: at once).
func (h *Hooks) SetDelay(d time.Duration) { h.delay.Store(int64(d)) }

// Fault is a one-shot misbehaviour (Hooks.FailNext).
type Fault int

const (
	NoFault Fault = iota
	// FaultCloseOnQuery (TCP, DoT): read the query, then close the
	// connection without answering — an upstream's idle close racing it.
	FaultCloseOnQuery
	// FaultPartialLength (TCP, DoT): send one byte of the length prefix,
	// then close.
	FaultPartialLength
	// FaultWrongID: answer with another message ID.
	FaultWrongID
	// FaultWrongQuestion: answer a different name.
	FaultWrongQuestion
	// FaultStatus500 (DoH): answer HTTP 500.
	FaultStatus500
	// FaultContentType (DoH): answer with Content-Type text/plain.
	FaultContentType
	// FaultOversized (DoH): a body larger than any DNS message.
	FaultOversized
)

// faultQueue is a FIFO of one-shot faults shared by a listener's connections.
type faultQueue struct {
	mu sync.Mutex
	q  []Fault
}

func (f *faultQueue) push(x Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.q = append(f.q, x)
}

func (f *faultQueue) take() Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.q) == 0 {
		return NoFault
	}
	x := f.q[0]
	f.q = f.q[1:]
	return x
}

// takeFault is the next one-shot fault of l, NoFault without Hooks.
func (l *listener) takeFault() Fault {
	if l.Hooks == nil {
		return NoFault
	}
	return l.Hooks.faults.take()
}

// hookDelay is the Hooks delay of l, 0 without Hooks.
func (l *listener) hookDelay() time.Duration {
	if l.Hooks == nil {
		return 0
	}
	return time.Duration(l.Hooks.delay.Load())
}

// mangle applies the answer-level faults.
func mangle(r *dns.Msg, f Fault) {
	switch f {
	case FaultWrongID:
		r.Id++
	case FaultWrongQuestion:
		if len(r.Question) > 0 {
			r.Question[0].Name = "wrong." + r.Question[0].Name
		}
	default: // the other faults act on the connection, not the answer
	}
}

// answer builds the reply to q: the Hooks answer function or the synthetic
// answer, then the fault and the hostile behaviours applied. nil: send
// nothing.
func (l *listener) answer(ctx context.Context, q *dns.Msg, f Fault) *dns.Msg {
	var r *dns.Msg
	if l.Hooks != nil && l.Hooks.Answer != nil {
		r = l.Hooks.Answer(ctx, q)
	} else {
		r = respond(q, l.Behaviour, l.s.cfg.TTL)
	}
	if r == nil {
		return nil
	}
	mangle(r, f)
	hostile(r, q, l.Behaviour)
	return r
}
