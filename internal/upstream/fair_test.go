package upstream

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// TestPool_floodFromOneClientLeavesAnothersMissesFast: one client keeps 128
// unique-name queries in flight against one DoT upstream on loopback (100 ms
// per answer, 32 slots), four times the slots; another client's misses,
// asked one after another, keep their median within twice the idle median
// measured in the same test. Without a share the normal client's query waits
// among the flood's 96 waiters, woken in no order: about three round trips.
// The flood is bounded by count of workers and by the normal client's 20
// queries; its own queries must keep being answered too (it is served, only
// held to its share while someone else waits).
func TestPool_floodFromOneClientLeavesAnothersMissesFast(t *testing.T) {
	const latency = 100 * time.Millisecond
	ca := testutil.NewCA(t)
	up := testutil.StartDoTWith(t, ca, "dot.test", "latency="+latency.String(), nil)
	ep := transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", up.Addr.Port()), up.Addr)
	p, err := New(Options{Attempt: 3 * time.Second, Total: 5 * time.Second}, []Member{{Endpoint: ep, Client: NewDoT(ep, ca.Pool(), nil)}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	normal := WithClient(t.Context(), netip.MustParseAddr("127.0.0.2"))
	flooder := WithClient(t.Context(), netip.MustParseAddr("127.0.0.66"))
	ask := func(ctx context.Context, name string) (time.Duration, error) {
		start := time.Now()
		_, _, err := p.Resolve(ctx, poolTestQuery(name))
		return time.Since(start), err
	}
	median := func(round string) time.Duration {
		var ds []time.Duration
		for i := range 20 {
			d, err := ask(normal, fmt.Sprintf("n%d.%s.normal.test.", i, round))
			if err != nil {
				t.Fatalf("%s: the normal client's miss %d failed: %v", round, i, err)
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	if _, err := ask(normal, "warm.test."); err != nil { // the connection's handshake is nobody's wait
		t.Fatal(err)
	}
	idle := median("idle")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var flooded, floodFailed atomic.Int64
	for w := range 128 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := ask(flooder, fmt.Sprintf("f%d-%d.flood.test.", w, i)); err != nil {
					floodFailed.Add(1)
				}
				flooded.Add(1)
			}
		})
	}
	// The flood holds every slot and has queries waiting before the
	// normal client asks.
	testutil.WaitFor(t, "the flood to fill the slots", 10*time.Second, func() bool {
		return p.entries[0].inFlight.Load() >= int64(p.entries[0].slots) && p.board.waiters.Load() > 0
	})
	busy := median("flooded")
	close(stop)
	wg.Wait()

	t.Logf("normal client's miss p50: idle %v, under the flood %v; flood queries %d (%d failed)", idle, busy, flooded.Load(), floodFailed.Load())
	if busy > 2*idle {
		t.Errorf("under a one-client flood the normal client's p50 is %v, over twice the idle %v", busy, idle)
	}
	if flooded.Load() == 0 || floodFailed.Load() > flooded.Load()/2 {
		t.Errorf("the flooding client got %d of %d answered: held to its share, not shut out", flooded.Load()-floodFailed.Load(), flooded.Load())
	}
	poolTestAllFree(t, p)
}

// TestPool_queryTurnedAwayForAnothersWaitIsWokenWhenItEnds: client A, at
// its share of the primary (two of four slots, stalled), asks again while
// client B's query waits for the standby (it got SERVFAIL from the
// primary, so only the standby is left to it). A slot of the primary
// frees; A's query is turned away for B's waiting one, though B cannot use
// that slot. When B's wait ends (its client gave up), A's query takes the
// free slot at once. Without a wake-up at the end of B's wait it sat
// beside the free slot until the next release: here, the end of A's own
// stalled exchanges a minute later.
func TestPool_queryTurnedAwayForAnothersWaitIsWokenWhenItEnds(t *testing.T) {
	primary := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
		switch name := m.Question[0].Name; {
		case strings.HasPrefix(name, "stalled"):
			return poolTestStall(ctx, m)
		case name == "b.test.":
			return poolTestReply(m, dns.RcodeServerFailure), nil
		}
		return poolTestAnswer(ctx, m)
	}}
	standby := &fakeClient{onExchange: poolTestAnswer}
	p := poolTestNew(t, Options{Attempt: time.Minute, Total: time.Minute, Slots: 4}, primary, standby)
	releaseStandby := poolTestHold(t, p, 1, 4)

	clientA := WithClient(t.Context(), netip.MustParseAddr("127.0.0.10"))
	stalledCtx, stopStalled := context.WithCancel(clientA)
	stalled := []<-chan poolTestResult{poolTestGo(stalledCtx, p, "stalled1.test."), poolTestGo(stalledCtx, p, "stalled2.test.")}
	testutil.WaitFor(t, "A's two exchanges to stall on the primary", 10*time.Second, func() bool { return primary.live.Load() == 2 })

	ctxB, giveUpB := context.WithCancel(WithClient(t.Context(), netip.MustParseAddr("127.0.0.11")))
	b := poolTestGo(ctxB, p, "b.test.")
	testutil.WaitFor(t, "B to wait for the standby", 10*time.Second, func() bool {
		return primary.live.Load() == 3 && p.board.waiters.Load() == 1
	})
	releasePrimary := poolTestHold(t, p, 0, 2) // the primary full: A's two and two others

	a := poolTestGo(clientA, p, "a.test.")
	testutil.WaitFor(t, "A's query to wait", 10*time.Second, func() bool { return p.board.waiters.Load() == 2 })
	p.shares.mu.Lock()
	p.shares.refused = false
	p.shares.mu.Unlock()
	releasePrimary() // a primary slot frees while B waits
	testutil.WaitFor(t, "A's query to be turned away for B's wait", 10*time.Second, func() bool {
		p.shares.mu.Lock()
		defer p.shares.mu.Unlock()
		return p.shares.refused
	})
	giveUpB()
	if r := <-b; r.err == nil {
		t.Fatalf("B's query answered (%v) with the standby held", r.resp)
	}

	select {
	case r := <-a:
		if r.err != nil || r.upstream != poolTestURL(0) {
			t.Errorf("A's query: %v from %q, want an answer from the primary", r.err, r.upstream)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's query still waits beside a free primary slot after B's wait ended")
	}
	stopStalled()
	for _, ch := range stalled {
		<-ch
	}
	releasePrimary()
	for range 4 {
		releaseStandby()
	}
	poolTestAllFree(t, p)
}

// TestShares_oddSlotsLeaveNoFreeSlotIdle: two clients each hold one of an
// entry's three slots and each has a query waiting; the free third slot
// goes to one of them. With the share rounded down (one slot), each was
// turned away for the other's waiting query and the slot sat idle until a
// release.
func TestShares_oddSlotsLeaveNoFreeSlotIdle(t *testing.T) {
	var s shares
	e := &entry{slots: 3}
	a := &query{client: netip.MustParsePrefix("127.0.0.10/32"), hasClient: true}
	b := &query{client: netip.MustParsePrefix("127.0.0.11/32"), hasClient: true}
	if !s.take(e, a) || !s.take(e, b) {
		t.Fatal("an idle entry turned a client away")
	}
	s.begin(a)
	s.begin(b)
	if !s.take(e, a) && !s.take(e, b) {
		t.Error("both clients turned away with the third slot free")
	}
}

// WithClient's context is an ordinary one: the client is found through the
// contexts derived from it, the caller's cancellation and values pass
// through it, and a context without a client has none.
func TestWithClient_isFoundThroughDerivedContexts(t *testing.T) {
	type otherKey struct{}
	parent, cancel := context.WithCancel(context.WithValue(t.Context(), otherKey{}, "kept"))
	ctx := WithClient(parent, netip.MustParseAddr("2001:db8::1"))
	derived, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer stop()
	for name, c := range map[string]context.Context{"itself": ctx, "derived": derived} {
		k, ok := shareKey(c)
		if want := netip.MustParsePrefix("2001:db8::/64"); !ok || k != want {
			t.Errorf("%s: share key %v, %v; want %v", name, k, ok, want)
		}
		if v := c.Value(otherKey{}); v != "kept" {
			t.Errorf("%s: the caller's value is %v", name, v)
		}
	}
	child, stopChild := context.WithCancel(ctx)
	defer stopChild()
	cancel()
	<-child.Done() // the caller's cancellation reaches through; a hang fails the test
	if _, ok := shareKey(t.Context()); ok {
		t.Error("a context without a client has a share key")
	}
}
