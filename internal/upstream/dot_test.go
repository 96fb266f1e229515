package upstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

// dotTestSetup starts a DoT server with a certificate for serverName and a
// client that expects dot.test, closed at cleanup.
func dotTestSetup(t *testing.T, serverName string, h testutil.Handler) (*testutil.DoTServer, *DoT, *certs.CA) {
	t.Helper()
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, serverName, h)
	ep := transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", srv.Addr.Port()), srv.Addr)
	c := NewDoT(ep, ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	return srv, c, ca
}

func TestDoT_reusesConnection(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	transportMustExchange(t, c, "a.example.")
	transportMustExchange(t, c, "b.example.")
	if srv.Accepts() != 1 || srv.Handshakes() != 1 {
		t.Errorf("accepts %d, handshakes %d; want 1, 1: the second exchange reuses the connection",
			srv.Accepts(), srv.Handshakes())
	}
}

// The burst staircase of docs/design.md#burst-staircase: 30 unique names at once against an
// upstream 30 ms away must take about one round trip, not 30.
func TestDoT_burstCompletesInAboutOneRoundTrip(t *testing.T) {
	const n, rtt = 30, 30 * time.Millisecond
	srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	srv.SetDelay(rtt)
	start := time.Now()
	dotTestBurst(t, c, n, "burst")
	elapsed := time.Since(start)
	// Cold: one handshake plus one round trip. The margin absorbs -race and
	// two shared cores; a serial staircase would need n*rtt = 900 ms.
	if budget := rtt + 300*time.Millisecond; elapsed > budget {
		t.Errorf("%d concurrent exchanges took %v, want under %v (about one %v round trip)", n, elapsed, budget, rtt)
	}
	if srv.Accepts() > DoTMaxConns {
		t.Errorf("accepts %d, want at most DoTMaxConns=%d", srv.Accepts(), DoTMaxConns)
	}
	if srv.Queries() != n {
		t.Errorf("server saw %d queries, want %d", srv.Queries(), n)
	}
}

// dotTestUpConns is how many of c's connections are established and take
// new exchanges.
func dotTestUpConns(c *DoT) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, conn := range c.conns {
		if _, up, ok := conn.load(); up && ok {
			n++
		}
	}
	return n
}

// dotTestBurst runs n concurrent exchanges for distinct names and fails the
// test on any error (each response is validated against its own question).
func dotTestBurst(t *testing.T, c Client, n int, prefix string) {
	t.Helper()
	ctx := transportCtx(t)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			q := transportQuery(fmt.Sprintf("%s%d.example.", prefix, i))
			r, err := c.Exchange(ctx, q)
			if err == nil && r.Id != q.Id {
				err = fmt.Errorf("id %d, want %d", r.Id, q.Id)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("exchange: %v", err)
		}
	}
}

// The upstream closes the idle connection just as our query reaches it: the
// exchange succeeds through one redial and counts a recovery, not a failure.
func TestDoT_recoversFromIdleCloseRacingTheQuery(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	transportMustExchange(t, c, "a.example.")
	srv.FailNext(testutil.FaultCloseOnQuery)
	transportMustExchange(t, c, "b.example.")
	if got := c.ReuseRecoveries(); got != 1 {
		t.Errorf("ReuseRecoveries = %d, want 1", got)
	}
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2: exactly one redial", srv.Accepts())
	}
}

// The upstream closed an idle connection just as our next query went out on
// it: the client reused the connection, no byte of the answer came, the cause
// is EOF, so the exchange succeeds through exactly one redial (resuming the
// TLS session) and counts one recovery. The proxy holds the close back until
// the query meets it, so the client cannot have noticed it first.
func TestDoT_redialsAfterServerClosedIdleConnection(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	px := startTCPProxy(t, srv.Addr)
	c := NewDoT(transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", px.Addr.Port()), px.Addr), ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	transportMustExchange(t, c, "a.example.")
	px.conn(t, 0).holdClose()
	if n := srv.CloseIdle(); n != 1 {
		t.Fatalf("server closed %d idle connections, want 1", n)
	}
	transportMustExchange(t, c, "b.example.")
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2: exactly one redial", srv.Accepts())
	}
	if got := c.ReuseRecoveries(); got != 1 {
		t.Errorf("ReuseRecoveries = %d, want 1", got)
	}
	if srv.Resumed() != 1 {
		t.Errorf("resumed handshakes %d, want 1: the redial resumes the TLS session", srv.Resumed())
	}
}

// The upstream closed an idle connection and the client noticed before its
// next query: that query dials a new connection outright, which is no
// recovery (nothing failed).
func TestDoT_noticedServerCloseDialsWithoutRecovery(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	transportMustExchange(t, c, "a.example.")
	c.mu.Lock()
	first := c.conns[0]
	c.mu.Unlock()
	if n := srv.CloseIdle(); n != 1 {
		t.Fatalf("server closed %d idle connections, want 1", n)
	}
	select {
	case <-first.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the client did not notice the server's close within 5 s")
	}
	transportMustExchange(t, c, "b.example.")
	if srv.Accepts() != 2 || c.ReuseRecoveries() != 0 {
		t.Errorf("accepts %d, recoveries %d; want 2, 0", srv.Accepts(), c.ReuseRecoveries())
	}
}

// A recovered stale connection is invisible to the pool (docs/design.md#stale-connection): the query
// is answered, the upstream's health records a success and no failure, and
// the recovery shows in the snapshot (nxdns_upstream_reuse_recoveries_total).
func TestDoT_staleRecoveryThroughThePoolRecordsNoFailure(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	ep := transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", srv.Addr.Port()), srv.Addr)
	p, err := New(Options{Attempt: 2 * time.Second, Total: 5 * time.Second}, []Member{{Endpoint: ep, Client: NewDoT(ep, ca.Pool(), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for i, name := range []string{"a.example.", "b.example."} {
		if i == 1 {
			srv.FailNext(testutil.FaultCloseOnQuery) // the warm connection dies under the query
		}
		resp, up, err := p.Resolve(transportCtx(t), transportQuery(name))
		if err != nil || len(resp.Answer) != 1 {
			t.Fatalf("resolve %s: %v, %v; want an answer", name, resp, err)
		}
		if up != ep.Redacted() {
			t.Errorf("attributed %q, want %q", up, ep.Redacted())
		}
	}
	u := p.Snapshot().Upstreams[0]
	if u.Failures != 0 || u.Successes != 2 || u.ReuseRecoveries != 1 || u.InBackoff {
		t.Errorf("failures %d, successes %d, recoveries %d, backoff %v; want 0, 2, 1, false",
			u.Failures, u.Successes, u.ReuseRecoveries, u.InBackoff)
	}
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2: one redial", srv.Accepts())
	}
}

// Once a byte of the response arrived the upstream was answering: a close
// then is its fault, final, with no redial.
func TestDoT_partialLengthOnReusedConnectionIsFinal(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	transportMustExchange(t, c, "a.example.")
	srv.FailNext(testutil.FaultPartialLength)
	_, err := c.Exchange(transportCtx(t), transportQuery("b.example."))
	transportWantKind(t, err, KindNetwork, c.name)
	if !errors.Is(err, ErrPeerFault) {
		t.Errorf("error %v is not a peer fault", err)
	}
	if srv.Accepts() != 1 {
		t.Errorf("accepts %d, want 1: no retry after the response started", srv.Accepts())
	}
	if got := c.ReuseRecoveries(); got != 0 {
		t.Errorf("ReuseRecoveries = %d, want 0", got)
	}
}

func TestDoT_badResponseIsPeerFaultAndClosesConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault testutil.Fault
		want  Kind
	}{
		{"wrong ID", testutil.FaultWrongID, KindResponseMismatch},
		{"wrong question", testutil.FaultWrongQuestion, KindResponseMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
			transportMustExchange(t, c, "a.example.")
			srv.FailNext(tc.fault)
			_, err := c.Exchange(transportCtx(t), transportQuery("b.example."))
			transportWantKind(t, err, tc.want, c.name)
			if !errors.Is(err, ErrPeerFault) {
				t.Errorf("error %v is not a peer fault", err)
			}
			transportMustExchange(t, c, "c.example.")
			if srv.Accepts() != 2 {
				t.Errorf("accepts %d, want 2: the bad response closed the connection", srv.Accepts())
			}
			if got := c.ReuseRecoveries(); got != 0 {
				t.Errorf("ReuseRecoveries = %d, want 0: a bad response is never retried", got)
			}
		})
	}
}

func TestDoT_certificateForAnotherNameNeverSendsTheQuery(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "other.test", testutil.AnswerA("192.0.2.1"))
	_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
	transportWantKind(t, err, KindNetwork, c.name)
	if !errors.Is(err, ErrPeerFault) {
		t.Errorf("error %v is not a peer fault", err)
	}
	if srv.Queries() != 0 || srv.Handshakes() != 0 {
		t.Errorf("server saw %d queries, %d handshakes; want 0, 0", srv.Queries(), srv.Handshakes())
	}
}

// One cancelled exchange must not disturb the others pipelined with it
// (docs/design.md#dot-client), and the connection stays in use afterwards.
func TestDoT_cancellingOnePipelinedExchangeLeavesTheOthers(t *testing.T) {
	const n = 5
	received := make(chan string, n)
	release := make(chan struct{})
	answer := testutil.AnswerA("192.0.2.1")
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		received <- q.Question[0].Name
		select {
		case <-release:
			return answer(ctx, q)
		case <-ctx.Done():
			return nil
		}
	})
	victimCtx, cancelVictim := context.WithCancel(transportCtx(t))
	results := make(map[string]chan error, n)
	for i := range n {
		name := fmt.Sprintf("p%d.example.", i)
		ctx := transportCtx(t)
		if i == 0 {
			ctx = victimCtx
		}
		ch := make(chan error, 1)
		results[name] = ch
		go func() {
			_, err := c.Exchange(ctx, transportQuery(name))
			ch <- err
		}()
	}
	for range n { // every query is on the wire before one is cancelled
		<-received
	}
	cancelVictim()
	transportWantKind(t, <-results["p0.example."], KindCanceled, c.name)
	close(release)
	for i := 1; i < n; i++ {
		if err := <-results[fmt.Sprintf("p%d.example.", i)]; err != nil {
			t.Errorf("exchange %d: %v", i, err)
		}
	}
	transportMustExchange(t, c, "after.example.")
	if srv.Accepts() != 1 {
		t.Errorf("accepts %d, want 1: the cancellation did not end the connection", srv.Accepts())
	}
}

func TestDoT_closesIdleConnectionAfterIdleTimeout(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", testutil.AnswerA("192.0.2.1"))
	c.idleTimeout = 50 * time.Millisecond
	transportMustExchange(t, c, "a.example.")
	c.mu.Lock()
	conn := c.conns[0]
	c.mu.Unlock()
	select {
	case <-conn.done:
	case <-time.After(5 * time.Second):
		t.Fatal("idle connection still open 5 s after a 50 ms idle timeout")
	}
	transportMustExchange(t, c, "b.example.")
	if srv.Accepts() != 2 || c.ReuseRecoveries() != 0 {
		t.Errorf("accepts %d, recoveries %d; want 2, 0: a closed idle connection is simply redialed",
			srv.Accepts(), c.ReuseRecoveries())
	}
}

// The caller's context decides the kind when it ends the exchange: the
// attempt timer's cause comes back, not a network error.
func TestDoT_expiredAttemptReportsTheContextCause(t *testing.T) {
	_, c, _ := dotTestSetup(t, "dot.test", func(context.Context, *dns.Msg) *dns.Msg { return nil })
	transportMustExchangeNone := func(ctx context.Context) error {
		_, err := c.Exchange(ctx, transportQuery("stall.example."))
		return err
	}
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), 100*time.Millisecond, KindAttemptExpired)
	defer cancel()
	transportWantKind(t, transportMustExchangeNone(ctx), KindAttemptExpired, c.name)
}

func TestDoT_closeEndsRunningExchanges(t *testing.T) {
	received := make(chan struct{}, 1)
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		received <- struct{}{}
		<-ctx.Done()
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(transportCtx(t), transportQuery("stall.example."))
		done <- err
	}()
	<-received
	c.Close()
	transportWantKind(t, <-done, KindCanceled, c.name)
	_, err := c.Exchange(transportCtx(t), transportQuery("late.example."))
	transportWantKind(t, err, KindCanceled, c.name)
	if srv.Accepts() != 1 {
		t.Errorf("accepts %d, want 1: no dial after Close", srv.Accepts())
	}
}

// A deadline passing with no frame back retires the connection from new
// exchanges (a half-open path), but the exchanges already pipelined on it
// keep their chance, and it closes once they are done.
func TestDoT_silentConnectionIsRetiredNotKilled(t *testing.T) {
	received := make(chan string, 2)
	release := make(chan struct{})
	answer := testutil.AnswerA("192.0.2.1")
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		name := q.Question[0].Name
		switch name {
		case "slow.example.", "stall.example.":
			received <- name
			select {
			case <-release:
				if name == "slow.example." {
					return answer(ctx, q)
				}
			case <-ctx.Done():
			}
			return nil
		}
		return answer(ctx, q)
	})
	slow := make(chan error, 1)
	go func() {
		_, err := c.Exchange(transportCtx(t), transportQuery("slow.example."))
		slow <- err
	}()
	<-received
	c.mu.Lock()
	first := c.conns[0]
	c.mu.Unlock()
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), 150*time.Millisecond, KindAttemptExpired)
	defer cancel()
	_, err := c.Exchange(ctx, transportQuery("stall.example."))
	transportWantKind(t, err, KindAttemptExpired, c.name)
	transportMustExchange(t, c, "fresh.example.")
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2: the silent connection takes no new exchange", srv.Accepts())
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("exchange pipelined on the retired connection: %v", err)
	}
	select {
	case <-first.done:
	case <-time.After(5 * time.Second):
		t.Error("retired connection still open 5 s after its last exchange")
	}
}

// At the connection cap a stale retry still runs on a connection created
// after its failure (docs/design.md#stale-connection), not on an older one the upstream may have
// closed in the same sweep: it dials one past the cap.
func TestDoT_staleRetryAtTheCapRunsOnAFreshConnection(t *testing.T) {
	var victimTries atomic.Int32
	received := make(chan string, 3*dotMaxInFlight+2)
	release := make(chan struct{})
	answer := testutil.AnswerA("192.0.2.1")
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		name := q.Question[0].Name
		switch {
		case name == "stall.example.", name == "victim.example." && victimTries.Add(1) == 1:
			received <- name
			<-ctx.Done() // unanswered until the connection ends
			return nil
		case strings.HasPrefix(name, "hold"):
			received <- name
			select {
			case <-release:
			case <-ctx.Done():
				return nil
			}
		}
		return answer(ctx, q)
	})
	px := startTCPProxy(t, srv.Addr)
	c := NewDoT(transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", px.Addr.Port()), px.Addr), ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })

	transportMustExchange(t, c, "warm.example.") // connection 1 is up: the victim reuses it
	victim := make(chan error, 1)
	go func() {
		_, err := c.Exchange(transportCtx(t), transportQuery("victim.example."))
		victim <- err
	}()
	<-received
	// A silent expiry retires connection 1: it keeps the victim, takes nothing new.
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), 150*time.Millisecond, KindAttemptExpired)
	_, err := c.Exchange(ctx, transportQuery("stall.example."))
	cancel()
	transportWantKind(t, err, KindAttemptExpired, c.name)
	<-received

	// Held exchanges, one at a time, until connections 2, 3 and 4 (dialed
	// ahead as the load grows) are up: the cap.
	held := make(chan error, 3*dotMaxInFlight)
	holds := 0
	for ; dotTestUpConns(c) < DoTMaxConns && holds < 3*dotMaxInFlight; holds++ {
		go func() {
			_, err := c.Exchange(transportCtx(t), transportQuery(fmt.Sprintf("hold%d.example.", holds)))
			held <- err
		}()
		<-received
	}
	if open := dotTestUpConns(c); open != DoTMaxConns || px.Accepts() != 4 {
		t.Fatalf("open connections %d, accepts %d; want DoTMaxConns=%d, 4 (setup)", open, px.Accepts(), DoTMaxConns)
	}

	px.conn(t, 0).cut() // the upstream closes connection 1 under the victim
	if err := <-victim; err != nil {
		t.Fatalf("victim: %v, want recovered", err)
	}
	if got := c.ReuseRecoveries(); got != 1 {
		t.Errorf("ReuseRecoveries = %d, want 1", got)
	}
	if px.Accepts() != 5 || victimTries.Load() != 2 {
		t.Errorf("accepts %d, victim sent %d times; want 5, 2: the retry dials a fifth connection",
			px.Accepts(), victimTries.Load())
	}
	close(release)
	for range holds {
		if err := <-held; err != nil {
			t.Errorf("held exchange: %v", err)
		}
	}
}
