package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// Group says whom an error is evidence about (docs/design.md#pool-classification). The four groups are
// disjoint: every Kind belongs to exactly one.
type Group uint8

const (
	PeerFault       Group = iota + 1 // record health, fail over
	LocalResource                    // we ran short: blame no upstream
	Cancellation                     // client or server left: answer nothing
	BudgetExhausted                  // the query's own time ran out
)

var groupText = [...]string{
	PeerFault:       "peer fault",
	LocalResource:   "local resource",
	Cancellation:    "cancellation",
	BudgetExhausted: "budget exhausted",
}

func (g Group) String() string {
	if int(g) < len(groupText) && groupText[g] != "" {
		return groupText[g]
	}
	return fmt.Sprintf("group(%d)", g)
}

// groupError is the sentinel of one group, so callers ask errors.Is(err,
// ErrPeerFault) without knowing the kinds.
type groupError struct{ g Group }

func (e *groupError) Error() string { return e.g.String() }

// The group sentinels. Every Kind Is exactly one of them.
var (
	ErrPeerFault       error = &groupError{PeerFault}
	ErrLocalResource   error = &groupError{LocalResource}
	ErrCancellation    error = &groupError{Cancellation}
	ErrBudgetExhausted error = &groupError{BudgetExhausted}
)

var groupErr = [...]error{
	PeerFault:       ErrPeerFault,
	LocalResource:   ErrLocalResource,
	Cancellation:    ErrCancellation,
	BudgetExhausted: ErrBudgetExhausted,
}

// Kind says what happened. A Kind is a comparable error value, so it serves as
// a context cause (context.WithDeadlineCause) and works with errors.Is.
type Kind uint8

const (
	KindNetwork          Kind = iota + 1 // refused, reset, EOF, TLS alert, certificate
	KindPeerTimeout                      // the transport's own timer fired, not ours
	KindAttemptExpired                   // our attempt timer, after a full attempt_timeout
	KindBadResponse                      // not a DNS response, or malformed (docs/design.md#response-validation)
	KindResponseMismatch                 // a response, but not to this query (docs/design.md#response-validation)
	KindResponseTooLarge                 // over the size limit (docs/design.md#response-validation)
	KindRcode                            // REFUSED or NOTIMP from the upstream; health counts it from a probe only (docs/upstream-pool.md)
	KindNoResources                      // out of memory, buffers or descriptors
	KindCanceled                         // the client or the server went away
	KindBudgetExhausted                  // the query's deadline passed
	kindEnd                              // keep last: TestKindGroup walks every Kind below it
)

var kindText = [...]string{
	KindNetwork:          "network error",
	KindPeerTimeout:      "upstream timeout",
	KindAttemptExpired:   "attempt timeout",
	KindBadResponse:      "bad response",
	KindResponseMismatch: "response mismatch",
	KindResponseTooLarge: "response too large",
	KindRcode:            "upstream refused the query",
	KindNoResources:      "no local resources",
	KindCanceled:         "canceled",
	KindBudgetExhausted:  "budget exhausted",
}

func (k Kind) Error() string {
	if k > 0 && k < kindEnd {
		return kindText[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Is makes every Kind match its group's sentinel.
func (k Kind) Is(target error) bool { return target == groupErr[k.Group()] }

// Group maps each Kind to its group, exhaustively. There is no default case: a Kind added without
// a decision here panics in TestKindGroup and is flagged by the exhaustive
// analyzer in CI.
func (k Kind) Group() Group {
	switch k {
	case KindNetwork, KindPeerTimeout, KindAttemptExpired, KindBadResponse,
		KindResponseMismatch, KindResponseTooLarge, KindRcode:
		return PeerFault
	case KindNoResources:
		return LocalResource
	case KindCanceled:
		return Cancellation
	case KindBudgetExhausted:
		return BudgetExhausted
	}
	panic(fmt.Sprintf("upstream: kind %d has no group", k))
}

// Classify returns the Kind an error carries. An error with no Kind is a bug
// of ours, not evidence about a peer, so it lands in KindNoResources
// (LocalResource): it blames no upstream.
func Classify(err error) Kind {
	if k, ok := errors.AsType[Kind](err); ok {
		return k
	}
	return KindNoResources
}

// KindOf is the one classifier of a failed exchange (docs/design.md#pool-classification), used by
// the pool's attempts and probes, the DoT and DoH transports and the forward
// zones alike. It reads the context first: when our attempt timer, the
// query's budget or the caller ended the exchange, the I/O error is a
// symptom (net's "i/o timeout" Is context.DeadlineExceeded too, so the error
// alone cannot tell a slow upstream from a spent budget), and the context's
// cause says why. Only a live context lets the error speak about the peer.
func KindOf(ctx context.Context, err error) Kind {
	if deadlinePassed(ctx) {
		// A socket deadline copied from ctx can fire a moment before ctx's
		// own timer; wait for it (it is due) so the cause, not the symptom,
		// decides.
		<-ctx.Done()
	}
	if ctx.Err() != nil {
		return causeKind(ctx)
	}
	if k, ok := errors.AsType[Kind](err); ok {
		return k // the transport already knew, e.g. KindBadResponse
	}
	var ne net.Error
	switch {
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE),
		errors.Is(err, syscall.ENOBUFS), errors.Is(err, syscall.ENOMEM):
		return KindNoResources
	case errors.As(err, &ne) && ne.Timeout():
		return KindPeerTimeout // the context is live: the transport's own timer
	default:
		return KindNetwork // refused, reset, EOF, TLS alert, certificate
	}
}

// causeKind is the Kind of an ended context's cause, as KindOf reads it:
// KindAttemptExpired, KindBudgetExhausted, KindCanceled or whatever Kind a
// caller set. A cause that is not one of ours (context.Canceled, or a
// deadline of a parent we do not own) means the client or the server went
// away.
func causeKind(ctx context.Context) Kind {
	if k, ok := errors.AsType[Kind](context.Cause(ctx)); ok {
		return k
	}
	return KindCanceled
}

// deadlinePassed reports whether ctx's deadline is behind us, even if its
// timer has not fired yet.
func deadlinePassed(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// AttemptError is one failed attempt against one upstream. Unwrap yields only
// the Kind: one error, one kind, one group. Err is the underlying cause, kept
// for the log.
type AttemptError struct {
	Upstream string // redacted URL ("" when no upstream was attempted)
	Kind     Kind
	Err      error
}

func (e *AttemptError) Error() string {
	if e.Upstream == "" {
		return fmt.Sprintf("%v: %v", e.Kind, e.Err)
	}
	return fmt.Sprintf("%s: %v: %v", e.Upstream, e.Kind, e.Err)
}

func (e *AttemptError) Unwrap() error { return e.Kind }

// QueryError is the final error for a query that got no answer from the pool
// or a forward zone. It carries what the handler needs for its Extended DNS
// Error (docs/design.md#pool-answers) and the query log, and unwraps to its decisive Kind only.
type QueryError struct {
	Kind       Kind
	Tried      []string      // redacted URLs attempted, in order (EDE 23 names them)
	Attributed string        // redacted URL the failure is attributed to, "" for none
	Budget     time.Duration // the query's whole budget (EDE 22 text)
	Err        error         // the last attempt's error, for the log
}

func (e *QueryError) Error() string {
	if e.Err == nil {
		return e.Kind.Error()
	}
	return fmt.Sprintf("%v: %v", e.Kind, e.Err)
}

func (e *QueryError) Unwrap() error { return e.Kind }

// newAttemptError is the pool's verdict on an attempt. When the transport
// already returned an *AttemptError, its underlying error is kept and its
// prefix dropped, so a log line names the upstream and the kind once.
func newAttemptError(upstream string, k Kind, err error) *AttemptError {
	if inner, ok := errors.AsType[*AttemptError](err); ok && inner.Err != nil {
		err = inner.Err
	}
	return &AttemptError{Upstream: upstream, Kind: k, Err: err}
}
