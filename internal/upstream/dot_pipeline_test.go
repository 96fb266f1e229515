package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/pathemu"
	"github.com/nxdns/nxdns/internal/testutil"
)

// dotTestAfter answers after d, or nothing once the connection ends.
func dotTestAfter(ctx context.Context, q *dns.Msg, d time.Duration) *dns.Msg {
	select {
	case <-time.After(d):
		return testutil.AnswerA("192.0.2.1")(ctx, q)
	case <-ctx.Done():
		return nil
	}
}

// dotTestWaitQueries waits until the server has read n queries: state in
// the server's goroutines, with nothing to block on.
func dotTestWaitQueries(t *testing.T, srv *testutil.DoTServer, n int) {
	t.Helper()
	testutil.WaitFor(t, fmt.Sprintf("the server to read %d queries", n), 5*time.Second, func() bool { return srv.Queries() >= n })
}

// dotTestBestOf runs f runs times and returns its shortest duration.
func dotTestBestOf(runs int, f func(i int)) time.Duration {
	var best time.Duration
	for i := range runs {
		start := time.Now()
		f(i)
		if took := time.Since(start); i == 0 || took < best {
			best = took
		}
	}
	return best
}

// Issue 12 finding 2 (docs/design.md#pool-classification): one bad frame on a pipelined connection is
// one fault. The exchange it answered fails and is recorded; the others
// waiting on the connection never received a response, so they retry once
// on a fresh connection and record nothing. Before, every one of them failed
// as a bad response, and three in flight put a healthy upstream in backoff.
func TestDoT_badFrameIsEvidenceOnceAndTheOthersRetry(t *testing.T) {
	const others = 4
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		if q.Question[0].Name == "bad.example." {
			r := testutil.AnswerA("192.0.2.1")(ctx, q)
			r.Question[0].Name = "other.example." // answers a question nobody asked
			return r
		}
		return dotTestAfter(ctx, q, 200*time.Millisecond)
	})
	ep := transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", srv.Addr.Port()), srv.Addr)
	p, err := New(Options{Attempt: 2 * time.Second, Total: 4 * time.Second}, []Member{{Endpoint: ep, Client: NewDoT(ep, ca.Pool(), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	if _, _, err := p.Resolve(transportCtx(t), transportQuery("warm.example.")); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	results := make(chan error, others)
	for i := range others {
		go func() {
			_, _, err := p.Resolve(transportCtx(t), transportQuery(fmt.Sprintf("good%d.example.", i)))
			results <- err
		}()
	}
	dotTestWaitQueries(t, srv, 1+others) // all pipelined on the warm connection
	if _, _, err := p.Resolve(transportCtx(t), transportQuery("bad.example.")); poolTestKind(err) != KindResponseMismatch {
		t.Errorf("bad.example: %v, want a response mismatch", err)
	}
	for range others {
		if err := <-results; err != nil {
			t.Errorf("an exchange pipelined beside the bad frame failed: %v", err)
		}
	}
	e := p.entries[0]
	if got := e.failures.Load(); got != 1 {
		t.Errorf("failures recorded = %d, want 1: one bad frame is one fault", got)
	}
	if e.health.backoff.Load() {
		t.Error("one bad frame put the upstream in backoff")
	}
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2: the collateral retries share one fresh connection", srv.Accepts())
	}
}

// Issue 12 finding 3 (docs/design.md#pool-classification, docs/design.md#dot-client): a query whose own budget ran out says
// nothing about the connection it waited on. Before, the silent-connection
// rule retired the warm connection, and the next query paid a handshake.
func TestDoT_budgetExpiryKeepsTheWarmConnection(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		if q.Question[0].Name == "stall.example." {
			<-ctx.Done()
			return nil
		}
		return testutil.AnswerA("192.0.2.1")(ctx, q)
	})
	transportMustExchange(t, c, "a.example.")
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), 150*time.Millisecond, KindBudgetExhausted)
	defer cancel()
	_, err := c.Exchange(ctx, transportQuery("stall.example."))
	transportWantKind(t, err, KindBudgetExhausted, c.name)
	transportMustExchange(t, c, "b.example.")
	if srv.Accepts() != 1 {
		t.Errorf("accepts %d, want 1: a budget expiry must not retire the warm connection", srv.Accepts())
	}
	if d := c.Dials(); d.New != 1 || d.Resumed != 0 || d.Failed != 0 {
		t.Errorf("dials %+v, want one new", d)
	}
}

// Issue 12 finding 5: a connection whose table of pending IDs fills (queries
// that left early keep their IDs) is retired, not failed: the exchange still
// waiting on it is answered, and the query that found it full goes to a new
// connection. Before, every exchange on it failed as a network error.
func TestDoT_fullIDTableRetiresWithoutFailingTheExchangesOnIt(t *testing.T) {
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		switch q.Question[0].Name {
		case "drop0.example.", "drop1.example.", "drop2.example.":
			return nil // never answered: their IDs stay pending
		case "slow.example.":
			return dotTestAfter(ctx, q, 300*time.Millisecond)
		}
		return testutil.AnswerA("192.0.2.1")(ctx, q)
	})
	c.maxPending = 4
	transportMustExchange(t, c, "a.example.")
	slow := make(chan error, 1)
	go func() {
		_, err := c.Exchange(transportCtx(t), transportQuery("slow.example."))
		slow <- err
	}()
	dotTestWaitQueries(t, srv, 2)
	for i := range 3 {
		ctx, cancel := context.WithCancel(transportCtx(t))
		done := make(chan error, 1)
		go func() {
			_, err := c.Exchange(ctx, transportQuery(fmt.Sprintf("drop%d.example.", i)))
			done <- err
		}()
		dotTestWaitQueries(t, srv, 3+i)
		cancel()
		transportWantKind(t, <-done, KindCanceled, c.name)
	}
	transportMustExchange(t, c, "b.example.") // 4 IDs pending: the table is full
	if err := <-slow; err != nil {
		t.Errorf("the exchange waiting on the full connection: %v, want its answer", err)
	}
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2: the full connection is retired, the next query dials", srv.Accepts())
	}
}

// docs/design.md#dot-client: extra connections are dialed ahead of need, in the background.
// Once the warm connection carries dotDialAhead exchanges a second one is
// dialed, and no exchange waited for it: all were already on the wire.
func TestDoT_dialsAheadOfNeedInTheBackground(t *testing.T) {
	release := make(chan struct{})
	srv, c, _ := dotTestSetup(t, "dot.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		if q.Question[0].Name != "warm.example." {
			select {
			case <-release:
			case <-ctx.Done():
				return nil
			}
		}
		return testutil.AnswerA("192.0.2.1")(ctx, q)
	})
	transportMustExchange(t, c, "warm.example.")
	results := make(chan error, dotDialAhead)
	for i := range dotDialAhead {
		go func() {
			_, err := c.Exchange(transportCtx(t), transportQuery(fmt.Sprintf("held%d.example.", i)))
			results <- err
		}()
	}
	dotTestWaitQueries(t, srv, 1+dotDialAhead)
	testutil.WaitFor(t, "a second established connection once the exchanges filled the first", 5*time.Second, func() bool { return dotTestUpConns(c) >= 2 })
	close(release)
	for range dotDialAhead {
		if err := <-results; err != nil {
			t.Errorf("held exchange: %v", err)
		}
	}
	if d := c.Dials(); d.New+d.Resumed != 2 || d.Failed != 0 {
		t.Errorf("dials %+v, want two that succeeded", d)
	}
	if srv.Accepts() != 2 {
		t.Errorf("accepts %d, want 2", srv.Accepts())
	}
}

// docs/design.md#dot-client and docs/design.md#lesson-round-trips, through a real round trip (internal/pathemu, 40
// ms): once a connection is up, a burst larger than dotDialAhead completes
// in one round trip. Before issue 12, exchanges past the 16th waited for a
// new connection's TCP and TLS handshakes, two round trips more.
func TestDoT_warmBurstNeverWaitsForAHandshake(t *testing.T) {
	const rtt, n = 100 * time.Millisecond, 40
	ca := testutil.NewCA(t)
	srv := testutil.StartDoT(t, ca, "dot.test", testutil.AnswerA("192.0.2.1"))
	relay, err := pathemu.Start("127.0.0.1:0", srv.Addr.String(), pathemu.Path{RTT: rtt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	ep := transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", relay.Addr.Port()), relay.Addr)

	// One round trip plus the margin of two shared cores and -race; a
	// handshake on the way would add two round trips (200 ms) every time,
	// where scheduling noise does not: the best of three is judged, each
	// with a client of its own that has exactly one warm connection. The
	// round trip is long so that the margin (1.5 round trips) is far from
	// both the noise of a loaded machine and the two a handshake adds.
	var took time.Duration
	for i := range 3 {
		c := NewDoT(ep, ca.Pool(), nil)
		transportMustExchange(t, c, "warm.example.")
		start := time.Now()
		dotTestBurst(t, c, n, fmt.Sprintf("warm-burst%d-", i))
		d := time.Since(start)
		c.Close()
		if i == 0 || d < took {
			took = d
		}
	}
	if limit := rtt + 3*rtt/2; took > limit {
		t.Errorf("%d exchanges on a warm connection took %v, want under %v: one waited for a handshake", n, took, limit)
	}
}

// The DoH client the same way (docs/design.md#dot-client, docs/design.md#doh-client), through a 100 ms path: a cold
// burst shares the one connection being set up (one dial, about three round
// trips: TCP, TLS, the query), and a warm burst is streams on that
// connection, one round trip, with no second connection.
func TestDoH_burstsShareOneConnectionThroughARoundTrip(t *testing.T) {
	const rtt, n, runs = 100 * time.Millisecond, 40, 3
	ca := testutil.NewCA(t)
	srv := testutil.StartDoH(t, ca, "doh.test", testutil.AnswerA("192.0.2.1"))
	relay, err := pathemu.Start("127.0.0.1:0", srv.Addr.String(), pathemu.Path{RTT: rtt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	ep := transportEndpoint(t, fmt.Sprintf("https://doh.test:%d/dns-query", relay.Addr.Port()), relay.Addr)

	// Margins: two shared cores and -race; the cold one also covers the
	// handshake's CPU. Each stays below the two round trips (200 ms) that a
	// second handshake on the way would add. Both are judged as the best of
	// three, so one slow moment of the host cannot fail them while a
	// handshake on the way fails every run: each cold burst on a client of
	// its own, each warm one on the last of those clients.
	var c *DoH
	cold := dotTestBestOf(runs, func(i int) {
		if c != nil {
			c.Close()
		}
		c = NewDoH(ep, ca.Pool(), nil)
		dotTestBurst(t, c, n, fmt.Sprintf("cold%d-", i))
		if d := c.Dials(); d.New+d.Resumed != 1 || d.Failed != 0 {
			t.Errorf("cold burst %d: dials %+v, want exactly one", i, d)
		}
	})
	t.Cleanup(func() { c.Close() })
	warm := dotTestBestOf(runs, func(i int) { dotTestBurst(t, c, n, fmt.Sprintf("warm%d-", i)) })
	for _, tc := range []struct {
		name               string
		took, want, margin time.Duration // want is the emulated cost
	}{{"cold", cold, 3 * rtt, 3 * rtt / 2}, {"warm", warm, rtt, 3 * rtt / 2}} {
		t.Logf("%s burst of %d: %v (emulated %v)", tc.name, n, tc.took.Round(time.Millisecond), tc.want)
		if limit := tc.want + tc.margin; tc.took > limit {
			t.Errorf("%s burst of %d took %v, want under %v", tc.name, n, tc.took, limit)
		}
	}
	if got := srv.Connections(); got != runs {
		t.Errorf("server saw %d connections, want %d: one for each client, shared by its bursts", got, runs)
	}
	if d := c.Dials(); d.New+d.Resumed != 1 || d.Failed != 0 {
		t.Errorf("dials %+v, want exactly one: the warm bursts opened none", d)
	}
}
