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

// doq0RTTRTT is the emulated path of the 0-RTT tests: long enough that
// "before the handshake completed" on the server (the client's Finished
// arrives one round trip after its first flight) is not a matter of
// scheduling.
const doq0RTTRTT = 100 * time.Millisecond

// doq0RTTSetup is an early DoQ server behind a path of doq0RTTRTT and a
// client that has resumable state: one exchange done, the session ticket
// (which allows early data) in its cache, and that connection closed by the
// server, so that the next query dials anew.
func doq0RTTSetup(t *testing.T) (*doqTestServer, *DoQ) {
	t.Helper()
	ca := testutil.NewCA(t)
	srv := startDoQTestServerEarly(t, ca, "doq.test", testutil.AnswerA("192.0.2.1"), true)
	relay, err := pathemu.Start("127.0.0.1:0", srv.Addr.String(), pathemu.Path{RTT: doq0RTTRTT})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	ep := transportEndpoint(t, fmt.Sprintf("quic://doq.test:%d", relay.Addr.Port()), relay.Addr)
	c := NewDoQ(ep, ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	transportMustExchange(t, c, "first.example.")
	testutil.WaitFor(t, "a session ticket", 5*time.Second, func() bool {
		_, ok := c.tlsConf.ClientSessionCache.Get("doq.test")
		return ok
	})
	srv.closeAll(DoQNoError)
	testutil.WaitFor(t, "the client sees the close", 5*time.Second, func() bool { return !doqTestUp(c) })
	return srv, c
}

// A redial with a ticket that allows early data sends the query in 0-RTT:
// the server reads it before the handshake has completed, answers it once,
// and the dial counts as 0-RTT accepted (RFC 9250 §4.5).
func TestDoQ_resumedDialSendsAQueryIn0RTT(t *testing.T) {
	srv, c := doq0RTTSetup(t)
	transportMustExchange(t, c, "second.example.")
	if got := srv.earlyQueries.Load(); got != 1 {
		t.Errorf("%d queries read before the handshake completed, want 1 (the second, in 0-RTT)", got)
	}
	if got := srv.queries.Load(); got != 2 {
		t.Errorf("server read %d queries, want 2: each once", got)
	}
	testutil.WaitFor(t, "the 0-RTT dial counted", 5*time.Second, func() bool { return c.Dials().ZeroRTTAccepted == 1 })
	if d := c.Dials(); d.ZeroRTTRejected != 0 || d.Resumed != 1 || d.New != 1 || c.resent.Load() != 0 {
		t.Errorf("dials %+v, resent %d; want one new, one resumed with 0-RTT accepted, none resent", d, c.resent.Load())
	}
}

// A server that rejects the 0-RTT processes none of it (RFC 9001 §4.6.2):
// every query of a burst that went in it is sent again once in 1-RTT on the
// same connection, and the server reads each query exactly once — none
// answered twice, none lost.
func TestDoQ_rejected0RTTIsSentAgainOnceIn1RTT(t *testing.T) {
	srv, c := doq0RTTSetup(t)
	srv.allow0RTT.Store(false)
	const n = 10
	dotTestBurst(t, c, n, "burst")
	if got := srv.queries.Load(); got != 1+n {
		t.Errorf("server read %d queries, want %d: the first, then each of the burst once", got, 1+n)
	}
	if got := srv.earlyQueries.Load(); got != 0 {
		t.Errorf("%d queries processed from a rejected 0-RTT, want 0", got)
	}
	if got := c.resent.Load(); got < 1 || got > n {
		t.Errorf("%d queries sent again, want between 1 and %d (those that went in the rejected 0-RTT)", got, n)
	}
	if got := srv.accepts.Load(); got != 2 {
		t.Errorf("accepts %d, want 2: the rejection costs no new connection", got)
	}
	testutil.WaitFor(t, "the rejected dial counted", 5*time.Second, func() bool { return c.Dials().ZeroRTTRejected == 1 })
}

// Only a standard query may travel in 0-RTT (RFC 9250 §4.5): an UPDATE on
// a connection in its 0-RTT phase waits for the handshake. Against a server
// that rejects 0-RTT, one sent early would have to be sent again; it is
// not.
func TestDoQ_nonQueryOpcodeWaitsForTheHandshake(t *testing.T) {
	srv, c := doq0RTTSetup(t)
	srv.allow0RTT.Store(false)
	q := transportQuery("update.example.")
	q.Opcode = dns.OpcodeUpdate
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exchange(ctx, q); err != nil {
		t.Fatalf("UPDATE: %v", err)
	}
	if got := c.resent.Load(); got != 0 {
		t.Errorf("UPDATE sent again %d times: it went in 0-RTT; want it held for the handshake", got)
	}
	if got := srv.queries.Load(); got != 2 {
		t.Errorf("server read %d queries, want 2", got)
	}
}

// The query's one deadline bounds a 0-RTT dial too: against a server that
// vanished after issuing the ticket (here every datagram is swallowed), the
// QUERY that went in 0-RTT and the UPDATE held for the handshake both end
// at their deadline as the attempt's expiry, not at the dial cap.
func TestDoQ_0RTTDialToAVanishedServerSpendsTheDeadline(t *testing.T) {
	_, c := doq0RTTSetup(t)
	hole := doqTestBlackHole(t)
	ep := transportEndpoint(t, fmt.Sprintf("quic://doq.test:%d", hole.Port()), hole)
	gone := NewDoQ(ep, testutil.NewCA(t).Pool(), nil)
	t.Cleanup(func() { gone.Close() })
	gone.tlsConf.ClientSessionCache = c.tlsConf.ClientSessionCache // the ticket, offered to the vanished server
	for _, opcode := range []int{dns.OpcodeQuery, dns.OpcodeUpdate} {
		q := transportQuery("gone.example.")
		q.Opcode = opcode
		ctx, cancel := context.WithTimeoutCause(context.Background(), 300*time.Millisecond, KindAttemptExpired)
		start := time.Now()
		_, err := gone.Exchange(ctx, q)
		cancel()
		transportWantKind(t, err, KindAttemptExpired, ep.Redacted())
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("%s: exchange took %v, want about its 300ms deadline", dns.OpcodeToString[opcode], el)
		}
	}
	if d := gone.Dials(); d.ZeroRTTAccepted+d.ZeroRTTRejected != 0 {
		t.Errorf("dials %+v: a handshake that never completed counts in neither 0-RTT outcome", d)
	}
}
