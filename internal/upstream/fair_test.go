package upstream

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
