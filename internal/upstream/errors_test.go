package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

var sentinels = map[Group]error{
	PeerFault:       ErrPeerFault,
	LocalResource:   ErrLocalResource,
	Cancellation:    ErrCancellation,
	BudgetExhausted: ErrBudgetExhausted,
}

// TestKindGroup walks every Kind below kindEnd: each has a text and exactly one
// group, the groups are disjoint, and together they cover every Kind. A Kind
// added without a decision in Group panics here.
func TestKindGroup(t *testing.T) {
	members := map[Group][]Kind{}
	for k := Kind(1); k < kindEnd; k++ {
		g := k.Group()
		members[g] = append(members[g], k)
		if k.Error() == fmt.Sprintf("kind(%d)", k) {
			t.Errorf("kind %d has no text", k)
		}
		matched := 0
		for sg, s := range sentinels {
			if errors.Is(k, s) {
				matched++
				if sg != g {
					t.Errorf("%v Is %v, but its group is %v", k, sg, g)
				}
			}
		}
		if matched != 1 {
			t.Errorf("%v matches %d group sentinels, want exactly 1", k, matched)
		}
	}
	total := 0
	for g := range sentinels {
		if len(members[g]) == 0 {
			t.Errorf("group %v has no kind", g)
		}
		total += len(members[g])
	}
	if want := int(kindEnd) - 1; total != want {
		t.Errorf("groups cover %d kinds, want %d", total, want)
	}
	// The decisions docs/design.md#pool-classification names explicitly.
	for k, want := range map[Kind]Group{
		KindNetwork:         PeerFault,
		KindPeerTimeout:     PeerFault,
		KindAttemptExpired:  PeerFault,
		KindRcode:           PeerFault,
		KindBadResponse:     PeerFault,
		KindNoResources:     LocalResource,
		KindCanceled:        Cancellation,
		KindBudgetExhausted: BudgetExhausted,
	} {
		if got := k.Group(); got != want {
			t.Errorf("%v.Group() = %v, want %v", k, got, want)
		}
	}
}

func TestKindGroup_unknownKindPanics(t *testing.T) {
	for _, k := range []Kind{0, kindEnd} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Kind(%d).Group() did not panic", k)
				}
			}()
			_ = k.Group()
		}()
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Kind
	}{
		{"bare kind", KindRcode, KindRcode},
		{"attempt error", &AttemptError{Upstream: "tls://192.0.2.1:853", Kind: KindPeerTimeout, Err: io.EOF}, KindPeerTimeout},
		{"wrapped attempt error", fmt.Errorf("exchange: %w", &AttemptError{Kind: KindBadResponse, Err: io.ErrUnexpectedEOF}), KindBadResponse},
		{"query error", &QueryError{Kind: KindBudgetExhausted, Err: &AttemptError{Kind: KindNetwork}}, KindBudgetExhausted},
		{"wrapped query error", fmt.Errorf("resolve: %w", &QueryError{Kind: KindCanceled}), KindCanceled},
		// An error with no Kind is our bug: it must blame no upstream.
		{"unknown error", errors.New("something odd"), KindNoResources},
		{"context error without kind", context.DeadlineExceeded, KindNoResources},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got != tt.want {
				t.Fatalf("Classify = %v, want %v", got, tt.want)
			}
			if !errors.Is(tt.err, sentinels[tt.want.Group()]) && tt.want != KindNoResources {
				t.Errorf("errors.Is(err, %v) = false", tt.want.Group())
			}
		})
	}
	if g := Classify(errors.New("x")).Group(); g != LocalResource {
		t.Errorf("unknown error lands in %v, want local resource", g)
	}
}

// TestAttemptError_unwrapsOnlyToItsKind: one error, one kind, one group. The
// underlying cause is for the log; it must not make the error match a second
// group (a net timeout Is context.DeadlineExceeded, for example).
func TestAttemptError_unwrapsOnlyToItsKind(t *testing.T) {
	err := error(&AttemptError{Upstream: "tls://192.0.2.1:853", Kind: KindNetwork, Err: context.DeadlineExceeded})
	if errors.Is(err, context.DeadlineExceeded) {
		t.Error("AttemptError exposes its underlying cause to errors.Is")
	}
	for g, s := range sentinels {
		if got, want := errors.Is(err, s), g == PeerFault; got != want {
			t.Errorf("errors.Is(err, %v) = %v, want %v", g, got, want)
		}
	}
	q := error(&QueryError{Kind: KindBudgetExhausted, Err: err})
	if errors.Is(q, ErrPeerFault) || !errors.Is(q, ErrBudgetExhausted) {
		t.Error("QueryError must match only its decisive kind's group")
	}
}

func TestNewAttemptErrorNamesUpstreamAndKindOnce(t *testing.T) {
	inner := &AttemptError{Upstream: "tls://192.0.2.1:853", Kind: KindNetwork, Err: errors.New("connection reset")}
	got := newAttemptError("tls://192.0.2.1:853", KindAttemptExpired, inner).Error()
	if want := "tls://192.0.2.1:853: attempt timeout: connection reset"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(newAttemptError("u", KindAttemptExpired, inner), ErrPeerFault) {
		t.Error("the pool's kind must decide the group")
	}
}

// TestKindOf is the one classifier's table (docs/design.md#pool-classification): the context's cause
// first, then a Kind the error carries, then errno and timeouts.
func TestKindOf(t *testing.T) {
	live := context.Background()
	cancelled := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	expired := func(cause error) context.Context {
		ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(-time.Second), cause)
		t.Cleanup(cancel)
		return ctx
	}
	// lagging's deadline is behind us while its timer is still due, as when a
	// socket deadline copied from the context fires a moment before the
	// context's own timer.
	lagging := func(cause error) context.Context {
		ctx, cancel := context.WithDeadlineCause(context.Background(), time.Now().Add(50*time.Millisecond), cause)
		t.Cleanup(cancel)
		return pastDeadline{ctx}
	}
	ioTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	sys := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", errno)}
	}
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want Kind
	}{
		{"our attempt timer ended it", expired(KindAttemptExpired), ioTimeout, KindAttemptExpired},
		{"the budget ended it", expired(KindBudgetExhausted), context.DeadlineExceeded, KindBudgetExhausted},
		{"the client left", cancelled(KindCanceled), context.Canceled, KindCanceled},
		{"a parent we do not own was cancelled", cancelled(nil), context.Canceled, KindCanceled},
		{"the transport's own timer", live, ioTimeout, KindPeerTimeout},
		{"descriptors exhausted", live, sys(syscall.EMFILE), KindNoResources},
		{"system file table full", live, sys(syscall.ENFILE), KindNoResources},
		{"no buffer space", live, sys(syscall.ENOBUFS), KindNoResources},
		{"connection refused", live, sys(syscall.ECONNREFUSED), KindNetwork},
		{"reset", live, sys(syscall.ECONNRESET), KindNetwork},
		{"EOF", live, io.EOF, KindNetwork},
		{"certificate", live, &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, KindNetwork},
		{"the transport knew", live, &AttemptError{Kind: KindResponseTooLarge, Err: errors.New("x")}, KindResponseTooLarge},
		{"client closed", live, errClientClosed, KindCanceled},
		{"our deadline passed, its timer not yet fired", lagging(KindAttemptExpired), ioTimeout, KindAttemptExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := KindOf(tc.ctx, tc.err); got != tc.want {
				t.Errorf("KindOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// pastDeadline reports a deadline already behind us while its Context's
// timer has not fired yet.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }
