package upstream

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// fakeClient is a callback Client for pool tests: onExchange decides each
// exchange. It counts live exchanges apart from probes (`. NS`).
type fakeClient struct {
	onExchange func(ctx context.Context, m *dns.Msg) (*dns.Msg, error)
	live       atomic.Int64 // exchanges for anything but the probe question
	probes     atomic.Int64
	closed     atomic.Bool
}

func (f *fakeClient) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	if poolTestIsProbe(m) {
		f.probes.Add(1)
	} else {
		f.live.Add(1)
	}
	return f.onExchange(ctx, m)
}

func (f *fakeClient) Close() error {
	f.closed.Store(true)
	return nil
}

var _ Client = (*fakeClient)(nil)

// The defaults of the field failures of docs/design.md#field-failures (attempt 2500 ms, total
// 5000 ms); the shipped ones are now 2000/4000 (internal/config).
var poolTestShipped = Options{Attempt: 2500 * time.Millisecond, Total: 5000 * time.Millisecond}

func poolTestIsProbe(m *dns.Msg) bool {
	return len(m.Question) == 1 && m.Question[0].Name == "." && m.Question[0].Qtype == dns.TypeNS
}

func poolTestQuery(name string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	return m
}

func poolTestReply(m *dns.Msg, rcode int) *dns.Msg {
	r := new(dns.Msg)
	r.SetRcode(m, rcode)
	return r
}

// poolTestAnswer answers at once.
func poolTestAnswer(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
	return poolTestReply(m, dns.RcodeSuccess), nil
}

// poolTestStall never answers; like a real transport whose socket deadline
// was poisoned, it returns an "i/o timeout" once ctx ends, an error that Is
// a timeout too: the pool must read the context, not the error.
func poolTestStall(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
	<-ctx.Done()
	return nil, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

var poolTestRefusedErr = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

// poolTestRefuse fails at once with connection refused.
func poolTestRefuse(context.Context, *dns.Msg) (*dns.Msg, error) { return nil, poolTestRefusedErr }

// poolTestAfter answers with then after d, or stalls out if ctx ends first.
func poolTestAfter(d time.Duration, then func(context.Context, *dns.Msg) (*dns.Msg, error)) func(context.Context, *dns.Msg) (*dns.Msg, error) {
	return func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return then(ctx, m)
		case <-ctx.Done():
			return poolTestStall(ctx, m)
		}
	}
}

// poolTestNew builds a pool of fakes with priorities in argument order and
// endpoints tls://192.0.2.N:853; the pool is closed at cleanup.
func poolTestNew(t testing.TB, opts Options, fakes ...*fakeClient) *Pool {
	t.Helper()
	members := make([]Member, len(fakes))
	for i, f := range fakes {
		ep, err := ParseEndpoint(fmt.Sprintf("tls://192.0.2.%d:853", i+1), "", "")
		if err != nil {
			t.Fatal(err)
		}
		members[i] = Member{Endpoint: ep, Client: f, Priority: i}
	}
	p, err := New(opts, members)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func poolTestURL(i int) string { return fmt.Sprintf("tls://192.0.2.%d:853", i+1) }

// poolTestHold takes n slots of entry pos directly, as stalled exchanges
// would, and returns a function giving one back (through the pool, so
// waiters wake).
func poolTestHold(t testing.TB, p *Pool, pos, n int) (releaseOne func()) {
	t.Helper()
	e := p.entries[pos]
	if !e.sem.TryAcquire(int64(n)) {
		t.Fatalf("entry %d: cannot hold %d slots", pos, n)
	}
	return func() { p.release(e, &query{}) }
}

// poolTestAllFree fails unless every slot of every entry is free, nothing is
// in flight and nobody waits: permits were conserved.
func poolTestAllFree(t *testing.T, p *Pool) {
	t.Helper()
	for _, e := range p.entries {
		if !e.sem.TryAcquire(int64(e.slots)) {
			t.Errorf("entry %d: not every slot is free: a permit leaked", e.pos)
			continue
		}
		e.sem.Release(int64(e.slots))
		if n := e.inFlight.Load(); n != 0 {
			t.Errorf("entry %d: in flight %d, want 0", e.pos, n)
		}
	}
	if n := p.board.waiters.Load(); n != 0 {
		t.Errorf("waiters = %d, want 0", n)
	}
	p.shares.mu.Lock()
	defer p.shares.mu.Unlock()
	if len(p.shares.held) != 0 || len(p.shares.waiting) != 0 || p.shares.waiters != 0 {
		t.Errorf("client shares left counted: held %v, waiting %v (%d)", p.shares.held, p.shares.waiting, p.shares.waiters)
	}
}

// poolTestBackoff puts entry pos in backoff as a failed start-up probe would.
func poolTestBackoff(p *Pool, pos int) {
	p.recordFailure(p.entries[pos], &AttemptError{Upstream: p.entries[pos].url, Kind: KindNetwork, Err: poolTestRefusedErr}, true)
}

// poolTestResult is one Resolve's outcome, for queries run in goroutines.
type poolTestResult struct {
	resp     *dns.Msg
	upstream string
	err      error
	took     time.Duration
}

// poolTestGo runs Resolve in a goroutine and returns its result channel.
func poolTestGo(ctx context.Context, p *Pool, name string) <-chan poolTestResult {
	ch := make(chan poolTestResult, 1)
	go func() {
		start := time.Now()
		resp, up, err := p.Resolve(ctx, poolTestQuery(name))
		ch <- poolTestResult{resp, up, err, time.Since(start)}
	}()
	return ch
}

// poolTestKind is the Kind of a Resolve error, 0 for none.
func poolTestKind(err error) Kind {
	if err == nil {
		return 0
	}
	return Classify(err)
}

func poolTestQueryError(t *testing.T, err error) *QueryError {
	t.Helper()
	qe, ok := err.(*QueryError)
	if !ok {
		t.Fatalf("error %v (%T) is not a *QueryError", err, err)
	}
	return qe
}
