package dnssec

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/testutil"
)

// heldWorld is a shadow Guard over a signed world whose DNSKEY lookups
// wait until release is closed (or their context ends); held counts the
// lookups that have begun waiting. The Guard's budget is a minute, so an
// answer that waited for the lookups would not come back within the
// tests' bounds.
func heldWorld(t *testing.T) (z *tzone, g *Guard, st *Stats, held *atomic.Int32, release chan struct{}) {
	t.Helper()
	w := newWorld(t)
	w.add("test.", dns.ECDSAP256SHA256, true)
	z = w.add("a.test.", dns.ED25519, true)
	held, release = new(atomic.Int32), make(chan struct{})
	v := w.validator(t, func(c *Config) {
		c.Fetch = func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
			if qtype == dns.TypeDNSKEY {
				held.Add(1)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return w.fetch(ctx, name, qtype)
		}
	})
	st = &Stats{}
	return z, NewGuard(v, Shadow, func() bool { return true }, zap.NewNop(), st, time.Minute), st, held, release
}

// exchangeBounded is r's answer to q, failing the test when it does not
// come back within a bound far above an answer's time and far below the
// Guard's budget: an answer that waited for the held lookups.
func exchangeBounded(t *testing.T, r Exchanger, q *dns.Msg) *dns.Msg {
	t.Helper()
	got := make(chan *dns.Msg, 1)
	go func() {
		res, err := r.Exchange(context.Background(), q)
		if err != nil {
			t.Error(err)
		}
		got <- res.Msg
	}()
	select {
	case m := <-got:
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no answer while the DNSKEY lookup was held: shadow waited for validation")
		return nil
	}
}

// In shadow mode the client's answer does not wait for the chain of trust:
// with the DNSKEY lookup held, the answer comes back (without AD: nothing
// was validated yet), and the verdict is counted once the lookup is
// released (docs/dnssec.md "Shadow: the verdict after the answer").
func TestGuard_shadowAnswersWhileTheChainFetchIsHeld(t *testing.T) {
	z, g, st, held, release := heldWorld(t)
	ans := z.sign(rr("www.a.test. 300 IN A 192.0.2.1"))
	r := g.Wrap(exchangerFunc(func(*dns.Msg) *dns.Msg { return msg("www.a.test.", dns.TypeA, 0, ans, nil) }))
	m := exchangeBounded(t, r, query("www.a.test.", true, false))
	if m.Rcode != dns.RcodeSuccess || m.AuthenticatedData || len(m.Answer) != 2 {
		t.Fatalf("answered %v, want the A and its RRSIG without AD", m)
	}
	testutil.WaitFor(t, "the validation's DNSKEY lookup", 10*time.Second, func() bool { return held.Load() > 0 })
	if s := st.Snapshot(); s.Secure+s.Bogus+s.Insecure+s.Indeterminate != 0 || s.Pending != 1 {
		t.Fatalf("before the lookup is released: %+v, want no verdict and one validation pending", s)
	}
	close(release)
	// The verdict is recorded inside the job, and the job leaves the
	// pending count just after: wait for both.
	testutil.WaitFor(t, "the secure verdict, nothing pending", 10*time.Second, func() bool {
		s := st.Snapshot()
		return s.Secure == 1 && s.Pending == 0
	})
	if s := st.Snapshot(); s.Bogus != 0 || s.Latency.Count != 1 {
		t.Errorf("after the release: %+v, want one secure verdict timed and nothing pending", s)
	}
}

// The validations shadow queues are bounded: with every worker held, at
// most shadowQueueMax answers wait, the rest are answered unvalidated and
// counted as skipped; every answer is either validated or counted.
func TestGuard_shadowQueueFullSkipsAndCounts(t *testing.T) {
	z, g, st, _, release := heldWorld(t)
	ans := z.sign(rr("www.a.test. 300 IN A 192.0.2.1"))
	r := g.Wrap(exchangerFunc(func(*dns.Msg) *dns.Msg { return msg("www.a.test.", dns.TypeA, 0, ans, nil) }))
	const extra = 20
	total := shadowWorkers + shadowQueueMax + extra
	for range total {
		if m := exchangeBounded(t, r, query("www.a.test.", false, false)); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Fatalf("answered %v, want the A alone", m)
		}
	}
	s := st.Snapshot()
	// Workers take jobs off the queue as they start: between extra and
	// extra+shadowWorkers answers found it full.
	if s.Skipped < extra || s.Skipped > extra+shadowWorkers || s.Pending > shadowWorkers+shadowQueueMax {
		t.Fatalf("with the workers held: %+v, want %d to %d skipped, at most %d pending", s, extra, extra+shadowWorkers, shadowWorkers+shadowQueueMax)
	}
	close(release)
	testutil.WaitFor(t, "the queue to drain", 20*time.Second, func() bool { return st.Snapshot().Pending == 0 })
	if s := st.Snapshot(); s.Secure+s.Skipped != uint64(total) || s.Bogus != 0 {
		t.Errorf("after the release: %+v, want %d secure or skipped", s, total)
	}
}

// A reload retires the Guard before its upstreams close: validations that
// have not started are skipped and counted (their lookups would fail and
// read as bogus), and Retire returns once the running ones have ended.
func TestGuard_shadowRetireSkipsQueuedAndWaitsForRunning(t *testing.T) {
	z, g, st, _, release := heldWorld(t)
	ans := z.sign(rr("www.a.test. 300 IN A 192.0.2.1"))
	r := g.Wrap(exchangerFunc(func(*dns.Msg) *dns.Msg { return msg("www.a.test.", dns.TypeA, 0, ans, nil) }))
	for range shadowWorkers + 1 {
		exchangeBounded(t, r, query("www.a.test.", true, false))
	}
	busy := func() int {
		st.shadow.mu.Lock()
		defer st.shadow.mu.Unlock()
		return st.shadow.busy
	}
	testutil.WaitFor(t, "every worker to hold a validation", 10*time.Second, func() bool { return busy() == shadowWorkers })
	retired := make(chan struct{})
	go func() {
		g.Retire(context.Background())
		close(retired)
	}()
	testutil.WaitFor(t, "Retire to begin", 10*time.Second, func() bool {
		g.jobsMu.Lock()
		defer g.jobsMu.Unlock()
		return g.retired
	})
	select {
	case <-retired:
		t.Fatal("Retire returned while validations were running")
	default:
	}
	close(release)
	select {
	case <-retired:
	case <-time.After(20 * time.Second):
		t.Fatal("Retire did not return after the running validations ended")
	}
	testutil.WaitFor(t, "the queue to drain", 10*time.Second, func() bool { return st.Snapshot().Pending == 0 })
	if s := st.Snapshot(); s.Secure != shadowWorkers || s.Skipped != 1 {
		t.Errorf("after Retire: %+v, want %d secure (running) and 1 skipped (queued)", s, shadowWorkers)
	}
}
