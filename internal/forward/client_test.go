package forward

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/upstream"
)

// mustFailWith checks the shape every failed Resolve has: a *QueryError of
// kind want that names the zone's resolver, which Resolve also returns.
func mustFailWith(t *testing.T, z *Zone, gotUpstream string, err error, want upstream.Kind) {
	t.Helper()
	if err == nil {
		t.Fatalf("Resolve succeeded, want %v", want)
	}
	qe, ok := errors.AsType[*upstream.QueryError](err)
	if !ok {
		t.Fatalf("error %T (%v), want *upstream.QueryError", err, err)
	}
	if qe.Kind != want || upstream.Classify(err) != want {
		t.Errorf("kind = %v, want %v (err: %v)", qe.Kind, want, err)
	}
	if qe.Attributed != z.URL() || !slices.Equal(qe.Tried, []string{z.URL()}) {
		t.Errorf("attributed %q, tried %q; want both to name %q", qe.Attributed, qe.Tried, z.URL())
	}
	if gotUpstream != z.URL() {
		t.Errorf("upstream = %q, want the zone's resolver %q", gotUpstream, z.URL())
	}
}

func TestResolve_UDPAnswerKeepsClientIDAndQuery(t *testing.T) {
	addr := startUDPServer(t, func(w dns.ResponseWriter, q *dns.Msg) {
		w.WriteMsg(answerA(q, "192.0.2.1"))
	})
	z := newTestZone(t, "udp", addr, 2*time.Second)
	q := queryA("host.lan.")
	q.Id = 4242
	before := q.String()

	resp, up, err := z.Resolve(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	if got := firstA(resp); got != "192.0.2.1" {
		t.Errorf("answer %q, want 192.0.2.1", got)
	}
	if resp.Id != 4242 {
		t.Errorf("response id %d, want the client's 4242", resp.Id)
	}
	if q.String() != before {
		t.Errorf("Resolve modified the query:\n%s\nwant\n%s", q, before)
	}
	if up != "udp://"+addr.String() {
		t.Errorf("upstream %q, want udp://%s", up, addr)
	}
	if s := z.snapshot(); s.Queries != 1 || s.Failures != 0 || s.Truncated != 0 {
		t.Errorf("counters %+v, want 1 query, no failure, no fallback", s)
	}
}

// The regression of docs/design.md#forward-zones: a TC=1 answer late in the budget followed by a
// TCP leg that never answers costs one read_timeout, never two.
func TestResolve_TruncatedThenStalledTCPCostsOneBudget(t *testing.T) {
	const budget = 600 * time.Millisecond
	udp, ln := listenPair(t)
	accepts := silentTCP(t, ln)
	addr := serveUDP(t, udp, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		select { // the fake's behaviour: answer late in the budget
		case <-time.After(budget * 6 / 10):
		case <-t.Context().Done():
			return
		}
		reply(t, conn, from, truncatedReply(q))
	})
	z := newTestZone(t, "udp", addr, budget)

	start := time.Now()
	_, up, err := z.Resolve(t.Context(), queryA("host.lan."))
	elapsed := time.Since(start)

	mustFailWith(t, z, up, err, upstream.KindPeerTimeout)
	if !errors.Is(err, upstream.ErrPeerFault) {
		t.Errorf("error is not a peer fault: %v", err)
	}
	if elapsed < budget*6/10 || elapsed >= budget*3/2 {
		t.Errorf("elapsed %v, want about one budget (%v), never two", elapsed, budget)
	}
	if n := accepts.Load(); n != 1 {
		t.Errorf("TCP accepts = %d, want 1: the TC=1 answer falls back to TCP", n)
	}
	s := z.snapshot()
	if s.Truncated != 1 || s.Failures != 1 || s.Queries != 1 {
		t.Errorf("counters %+v, want 1 query, 1 failure, 1 TC=1 fallback", s)
	}
}

func TestResolve_TruncatedFallsBackToTCP(t *testing.T) {
	udp, ln := listenPair(t)
	startTCPServer(t, ln, func(w dns.ResponseWriter, q *dns.Msg) {
		w.WriteMsg(answerA(q, "192.0.2.7"))
	})
	addr := serveUDP(t, udp, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		reply(t, conn, from, truncatedReply(q))
	})
	z := newTestZone(t, "udp", addr, 2*time.Second)

	resp, _, err := z.Resolve(t.Context(), queryA("big.lan."))
	if err != nil {
		t.Fatal(err)
	}
	if got := firstA(resp); got != "192.0.2.7" || resp.Truncated {
		t.Errorf("answer %q (TC=%v), want the full TCP answer 192.0.2.7", got, resp.Truncated)
	}
	if s := z.snapshot(); s.Truncated != 1 || s.Failures != 0 {
		t.Errorf("counters %+v, want 1 TC=1 fallback, no failure", s)
	}
}

func TestResolve_ForeignIDThenAnswer(t *testing.T) {
	addr := startUDP(t, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		foreign := answerA(q, "198.51.100.66")
		foreign.Id = q.Id + 1
		reply(t, conn, from, foreign)
		reply(t, conn, from, answerA(q, "192.0.2.1"))
	})
	z := newTestZone(t, "udp", addr, 2*time.Second)

	resp, _, err := z.Resolve(t.Context(), queryA("host.lan."))
	if err != nil {
		t.Fatal(err)
	}
	if got := firstA(resp); got != "192.0.2.1" {
		t.Errorf("answer %q, want 192.0.2.1 (the foreign datagram must be discarded)", got)
	}
}

func TestResolve_ForeignStreamCannotExtendDeadline(t *testing.T) {
	const budget = 400 * time.Millisecond
	var sent atomic.Int32
	addr := startUDP(t, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		foreign := answerA(q, "198.51.100.66")
		foreign.Id = q.Id ^ 0x8000
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for range 3 * budget / (10 * time.Millisecond) { // bounded: three budgets' worth
			reply(t, conn, from, foreign)
			sent.Add(1)
			select {
			case <-tick.C:
			case <-t.Context().Done():
				return
			}
		}
	})
	z := newTestZone(t, "udp", addr, budget)

	start := time.Now()
	_, up, err := z.Resolve(t.Context(), queryA("host.lan."))
	elapsed := time.Since(start)

	mustFailWith(t, z, up, err, upstream.KindPeerTimeout)
	if elapsed >= budget*3/2 {
		t.Errorf("elapsed %v with a stream of foreign datagrams, want under 1.5 × %v", elapsed, budget)
	}
	if n := sent.Load(); n < 5 {
		t.Errorf("only %d foreign datagrams sent during the exchange; the test proves nothing", n)
	}
}

func TestResolve_ForeignSourceDiscarded(t *testing.T) {
	spoofer, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spoofer.Close() })

	t.Run("then the real answer", func(t *testing.T) {
		addr := startUDP(t, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
			reply(t, spoofer, from, answerA(q, "198.51.100.66")) // right ID, wrong source
			reply(t, conn, from, answerA(q, "192.0.2.1"))
		})
		z := newTestZone(t, "udp", addr, 2*time.Second)
		resp, _, err := z.Resolve(t.Context(), queryA("host.lan."))
		if err != nil {
			t.Fatal(err)
		}
		if got := firstA(resp); got != "192.0.2.1" {
			t.Errorf("answer %q, want 192.0.2.1 from the resolver's own address", got)
		}
	})
	t.Run("alone", func(t *testing.T) {
		const budget = 300 * time.Millisecond
		addr := startUDP(t, func(_ *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
			reply(t, spoofer, from, answerA(q, "198.51.100.66"))
		})
		z := newTestZone(t, "udp", addr, budget)
		resp, up, err := z.Resolve(t.Context(), queryA("host.lan."))
		if resp != nil {
			t.Fatalf("accepted %q from a foreign source", firstA(resp))
		}
		mustFailWith(t, z, up, err, upstream.KindPeerTimeout)
	})
}

func TestResolve_TCPResolverSkipsUDP(t *testing.T) {
	udp, ln := listenPair(t)
	var udpQueries atomic.Int32
	serveUDP(t, udp, func(conn *net.UDPConn, from netip.AddrPort, q *dns.Msg) {
		udpQueries.Add(1)
		reply(t, conn, from, answerA(q, "198.51.100.66"))
	})
	addr := startTCPServer(t, ln, func(w dns.ResponseWriter, q *dns.Msg) {
		w.WriteMsg(answerA(q, "192.0.2.9"))
	})
	z := newTestZone(t, "tcp", addr, 2*time.Second)

	resp, up, err := z.Resolve(t.Context(), queryA("host.lan."))
	if err != nil {
		t.Fatal(err)
	}
	if got := firstA(resp); got != "192.0.2.9" {
		t.Errorf("answer %q, want the TCP answer 192.0.2.9", got)
	}
	// A UDP attempt would have reached the fake before the TCP query did.
	if n := udpQueries.Load(); n != 0 {
		t.Errorf("%d UDP queries reached the resolver, want 0 for tcp://", n)
	}
	if up != "tcp://"+addr.String() {
		t.Errorf("upstream %q, want tcp://%s", up, addr)
	}
}

func TestResolve_MismatchedTCPAnswerIsPeerFault(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := startTCPServer(t, ln, func(w dns.ResponseWriter, q *dns.Msg) {
		r := answerA(q, "192.0.2.1")
		r.Question[0].Name = "other.lan." // an answer to another question
		w.WriteMsg(r)
	})
	z := newTestZone(t, "tcp", addr, 2*time.Second)
	_, up, err := z.Resolve(t.Context(), queryA("host.lan."))
	mustFailWith(t, z, up, err, upstream.KindResponseMismatch)
}

func TestResolve_CanceledByCaller(t *testing.T) {
	got := make(chan struct{})
	addr := startUDP(t, func(*net.UDPConn, netip.AddrPort, *dns.Msg) { close(got) }) // never answers
	z := newTestZone(t, "udp", addr, 10*time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-got // the query is on the wire: the exchange is waiting
		cancel()
	}()

	start := time.Now()
	_, up, err := z.Resolve(ctx, queryA("host.lan."))
	mustFailWith(t, z, up, err, upstream.KindCanceled)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("cancellation took %v: the socket ignored the context", elapsed)
	}
	if s := z.snapshot(); s.Failures != 0 {
		t.Errorf("failures = %d, want 0: a cancellation is not the resolver's fault", s.Failures)
	}
}

func TestResolve_CallerDeadlineBoundsExchange(t *testing.T) {
	addr := startUDP(t, func(*net.UDPConn, netip.AddrPort, *dns.Msg) {}) // never answers
	z := newTestZone(t, "udp", addr, 10*time.Second)
	ctx, cancel := context.WithTimeoutCause(t.Context(), 200*time.Millisecond, upstream.KindBudgetExhausted)
	defer cancel()

	start := time.Now()
	_, up, err := z.Resolve(ctx, queryA("host.lan."))
	mustFailWith(t, z, up, err, upstream.KindBudgetExhausted) // the caller's cause passes through
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("elapsed %v: the caller's 200ms deadline did not bound the exchange", elapsed)
	}
}

func TestResolve_ClosedPortFailsAsNetworkError(t *testing.T) {
	conn, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(conn.LocalAddr().String())
	conn.Close() // nothing listens: the kernel answers ICMP port unreachable
	z := newTestZone(t, "udp", addr, 10*time.Second)

	start := time.Now()
	_, up, err := z.Resolve(t.Context(), queryA("host.lan."))
	mustFailWith(t, z, up, err, upstream.KindNetwork)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("elapsed %v: a refused datagram should fail at once, not at read_timeout", elapsed)
	}
}

// snapshot is the zone's counters.
func (z *Zone) snapshot() ZoneSnapshot {
	return (&Table{zones: []*Zone{z}}).Snapshot()[0]
}
