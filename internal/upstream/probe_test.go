package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// 15a. A primary that is dead at start is found by its start-up probe within
// the probe timeout and put in backoff before any live query pays for it.
// The probe holds no serving slot.
func TestProbe_startupStallEntersBackoffBeforeLiveQueriesPay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		primary := &fakeClient{onExchange: poolTestStall}
		standby := &fakeClient{onExchange: poolTestAnswer}
		opts := poolTestShipped
		opts.Logger = zap.New(core)
		p := poolTestNew(t, opts, primary, standby)
		p.Start()

		time.Sleep(probeTimeout - time.Millisecond)
		synctest.Wait()
		if p.entries[0].health.backoff.Load() {
			t.Fatal("in backoff before its probe timed out")
		}
		if s := p.Snapshot().Upstreams[0]; s.InFlight != 0 {
			t.Errorf("the probe counts as in flight: %d", s.InFlight)
		}
		poolTestAllFree(t, p) // the probe in flight holds no serving slot

		time.Sleep(time.Millisecond)
		synctest.Wait()
		s := p.Snapshot()
		if !s.Upstreams[0].InBackoff || s.Upstreams[1].InBackoff {
			t.Fatalf("backoff = %v/%v, want the dead primary only", s.Upstreams[0].InBackoff, s.Upstreams[1].InBackoff)
		}
		start := time.Now()
		_, up, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
		if err != nil || up != poolTestURL(1) || time.Since(start) != 0 {
			t.Errorf("Resolve = %q, %v after %v; want the standby at once", up, err, time.Since(start))
		}
		if primary.live.Load() != 0 {
			t.Errorf("a live query reached the dead primary")
		}
		if n := logs.FilterMessage("upstream entering backoff").Len(); n != 1 || logs.Len() != 1 {
			t.Errorf("log lines = %d (backoff %d), want the one backoff line", logs.Len(), n)
		}
		if s.Upstreams[0].Failures != 0 {
			t.Errorf("a probe counted as a failed request")
		}
		if u0, u1 := s.Upstreams[0], s.Upstreams[1]; u0.ProbeFailures != 1 || u0.ProbeSuccesses != 0 || u1.ProbeSuccesses != 1 || u1.ProbeFailures != 0 {
			t.Errorf("probe counters = %d/%d and %d/%d (ok/failed), want the primary's one failure and the standby's one success",
				u0.ProbeSuccesses, u0.ProbeFailures, u1.ProbeSuccesses, u1.ProbeFailures)
		}
	})
}

// 15b. In backoff, the entry is probed in the background on the jittered,
// capped schedule, one probe at a time; live queries do not reach it; when a
// probe succeeds it returns to service with one recovery line.
func TestProbe_backoffProbesOneAtATimeAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		var healthy atomic.Bool
		var inProbe, maxInProbe atomic.Int32
		var mu sync.Mutex
		var starts []time.Time
		primary := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
			if poolTestIsProbe(m) {
				n := inProbe.Add(1)
				defer inProbe.Add(-1)
				for old := maxInProbe.Load(); n > old && !maxInProbe.CompareAndSwap(old, n); old = maxInProbe.Load() {
				}
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				if !m.RecursionDesired {
					t.Error("probe without RD")
				}
			}
			if healthy.Load() {
				return poolTestAnswer(ctx, m)
			}
			return poolTestStall(ctx, m)
		}}
		standby := &fakeClient{onExchange: poolTestAnswer}
		opts := poolTestShipped
		opts.Logger = zap.New(core)
		p := poolTestNew(t, opts, primary, standby)
		p.Start()

		// Five minutes of outage, with live traffic every 10 s.
		for range 30 {
			time.Sleep(10 * time.Second)
			if _, up, err := p.Resolve(t.Context(), poolTestQuery("live.example.")); err != nil || up != poolTestURL(1) {
				t.Fatalf("during the outage: %q, %v", up, err)
			}
		}
		if primary.live.Load() != 0 {
			t.Errorf("live queries reached the primary in backoff %d times", primary.live.Load())
		}
		if !p.Snapshot().Upstreams[0].InBackoff {
			t.Fatal("the primary left backoff without a successful probe")
		}

		mu.Lock()
		probes := append([]time.Time(nil), starts...)
		mu.Unlock()
		if len(probes) < 8 {
			t.Fatalf("%d probes in five minutes, want the backoff schedule's (at least 8)", len(probes))
		}
		fractions := map[int64]bool{} // where each wait fell in its range, in millionths
		for k := 1; k < len(probes); k++ {
			// Each probe stalls probeTimeout; then the interval of step k-1.
			wait := probes[k].Sub(probes[k-1]) - probeTimeout
			d := min(backoffFirst<<(k-1), backoffMax)
			if wait < d/2 || wait > d {
				t.Errorf("interval %d = %v, want within [%v, %v]", k-1, wait, d/2, d)
			}
			fractions[int64(wait-d/2)*1e6/int64(d/2)] = true
		}
		if len(fractions) < len(probes)/2 {
			t.Errorf("intervals look unjittered: %d distinct offsets in %d", len(fractions), len(probes)-1)
		}
		if n := maxInProbe.Load(); n != 1 {
			t.Errorf("up to %d probes at once, want 1", n)
		}

		healthy.Store(true)
		time.Sleep(backoffMax + probeTimeout)
		synctest.Wait()
		if p.Snapshot().Upstreams[0].InBackoff {
			t.Fatal("a successful probe did not end the backoff")
		}
		if _, up, err := p.Resolve(t.Context(), poolTestQuery("back.example.")); err != nil || up != poolTestURL(0) {
			t.Errorf("after recovery: %q, %v; want the primary", up, err)
		}
		if logs.FilterMessage("upstream entering backoff").Len() != 1 || logs.FilterMessage("upstream recovered").Len() != 1 || logs.Len() != 2 {
			t.Errorf("log = %v, want one line each way", logs.All())
		}
	})
}

// 15c. What a probe counts as success: a valid response to `. NS` whose
// rcode is not REFUSED or NOTIMP, within probeTimeout.
func TestProbe_verdicts(t *testing.T) {
	reply := func(rc int) func(context.Context, *dns.Msg) (*dns.Msg, error) {
		return func(_ context.Context, m *dns.Msg) (*dns.Msg, error) { return poolTestReply(m, rc), nil }
	}
	tests := []struct {
		name     string
		exchange func(context.Context, *dns.Msg) (*dns.Msg, error)
		want     Kind // 0: success
	}{
		{"noerror", reply(dns.RcodeSuccess), 0},
		{"servfail shows a serving upstream", reply(dns.RcodeServerFailure), 0},
		{"refused", reply(dns.RcodeRefused), KindRcode},
		{"notimp", reply(dns.RcodeNotImplemented), KindRcode},
		{"answer to another query", func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
			r := poolTestReply(m, dns.RcodeSuccess)
			r.Id++
			return r, nil
		}, KindResponseMismatch},
		{"connection refused", poolTestRefuse, KindNetwork},
		{"stall", poolTestStall, KindAttemptExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: tt.exchange})
				start := time.Now()
				err := p.probe(t.Context(), p.entries[0])
				if time.Since(start) > probeTimeout {
					t.Errorf("probe took %v, over %v", time.Since(start), probeTimeout)
				}
				switch {
				case tt.want == 0 && err != nil:
					t.Errorf("probe = %v, want success", err)
				case tt.want != 0 && (err == nil || err.Kind != tt.want):
					t.Errorf("probe = %v, want %v", err, tt.want)
				}
			})
		})
	}
}
