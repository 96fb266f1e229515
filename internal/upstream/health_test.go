package upstream

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// 16a. A backoff episode logs one warn line on entry, with the last cause,
// and one info line on recovery, with the outage's length and failure count;
// the queries in between, and budget exhaustion, log nothing.
func TestHealth_backoffEpisodeLogsOneLineEachWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.DebugLevel)
		refusing := true
		f := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
			if refusing {
				return poolTestRefuse(ctx, m)
			}
			return poolTestAnswer(ctx, m)
		}}
		opts := poolTestShipped
		opts.Logger = zap.New(core)
		p := poolTestNew(t, opts, f)

		for i := range 10 { // 3 to enter backoff, 7 more through the last-resort pass
			if _, _, err := p.Resolve(t.Context(), poolTestQuery("a.example.")); poolTestKind(err) != KindNetwork {
				t.Fatalf("query %d: %v", i, err)
			}
			if got, want := p.entries[0].health.backoff.Load(), i+1 >= backoffThreshold; got != want {
				t.Errorf("after %d failures backoff = %v", i+1, got)
			}
		}
		entered := time.Now()
		free := poolTestHold(t, p, 0, DefaultSlots)
		if _, _, err := p.Resolve(t.Context(), poolTestQuery("b.example.")); poolTestKind(err) != KindBudgetExhausted {
			t.Fatalf("exhausted query: %v", err)
		}
		for range DefaultSlots {
			free()
		}
		time.Sleep(90 * time.Second)
		refusing = false
		if _, _, err := p.Resolve(t.Context(), poolTestQuery("c.example.")); err != nil {
			t.Fatal(err)
		}

		all := logs.All()
		if len(all) != 2 {
			t.Fatalf("log lines = %d, want 2: %v", len(all), all)
		}
		warn, info := all[0], all[1]
		if warn.Level != zap.WarnLevel || warn.Message != "upstream entering backoff" {
			t.Errorf("first line = %v %q", warn.Level, warn.Message)
		}
		wf := warn.ContextMap()
		if wf["upstream"] != poolTestURL(0) || wf["failures"] != int32(backoffThreshold) ||
			!strings.Contains(wf["cause"].(string), "connection refused") {
			t.Errorf("warn fields = %v", wf)
		}
		if info.Level != zap.InfoLevel || info.Message != "upstream recovered" {
			t.Errorf("second line = %v %q", info.Level, info.Message)
		}
		inf := info.ContextMap()
		if inf["outage"] != time.Since(entered) || inf["failures"] != int32(10) {
			t.Errorf("info fields = %v, want outage %v and 10 failures", inf, time.Since(entered))
		}
	})
}

// The threshold counts consecutive failures: a success in between resets it.
func TestHealth_successResetsTheCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := poolTestNew(t, poolTestShipped, &fakeClient{onExchange: poolTestAnswer})
		e := p.entries[0]
		for range 5 {
			for range backoffThreshold - 1 {
				p.recordFailure(e, poolTestRefusedErr, false)
			}
			p.recordSuccess(e)
		}
		if e.health.backoff.Load() || e.health.fails.Load() != 0 {
			t.Errorf("backoff = %v, fails = %d", e.health.backoff.Load(), e.health.fails.Load())
		}
	})
}

// 16b. Backoff intervals grow exponentially, are capped, and are jittered
// within the upper half of each step.
func TestBackoffInterval_jitteredAndCapped(t *testing.T) {
	prevLow := time.Duration(0)
	for step := range 40 {
		d := backoffMax
		if step < 16 {
			d = min(backoffFirst<<step, backoffMax)
		}
		low, high := backoffInterval(step, 0), backoffInterval(step, 0.999999)
		if low != d/2 || high > d || high < d-d/1000 {
			t.Errorf("step %d: range [%v, %v], want [%v, %v]", step, low, high, d/2, d)
		}
		if low < prevLow {
			t.Errorf("step %d: lower bound %v shrank from %v", step, low, prevLow)
		}
		if high > backoffMax {
			t.Errorf("step %d: %v over the cap", step, high)
		}
		prevLow = low
	}
	if backoffInterval(0, 0) != backoffFirst/2 {
		t.Errorf("first interval starts at %v", backoffInterval(0, 0))
	}
	if backoffInterval(1000, 0.5) > backoffMax {
		t.Error("a huge step overflows the cap")
	}
}

// The cause in the backoff line never carries the URL's secret path or query,
// even when a transport's error prints the request URL.
func TestHealth_causeIsRedacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		core, logs := observer.New(zap.InfoLevel)
		ep, err := ParseEndpoint("https://dns.example/SECRETTOKEN?key=SECRETKEY", "192.0.2.1", "")
		if err != nil {
			t.Fatal(err)
		}
		f := &fakeClient{onExchange: func(context.Context, *dns.Msg) (*dns.Msg, error) {
			return nil, &url.Error{Op: "Post", URL: ep.URL.String(), Err: poolTestRefusedErr}
		}}
		p, err := New(Options{Attempt: time.Second, Total: time.Second, Logger: zap.New(core)}, []Member{{Endpoint: ep, Client: f}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		for range backoffThreshold {
			_, _, _ = p.Resolve(t.Context(), poolTestQuery("a.example."))
		}
		if logs.Len() != 1 {
			t.Fatalf("log lines = %d, want 1", logs.Len())
		}
		cause := logs.All()[0].ContextMap()["cause"].(string)
		if strings.Contains(cause, "SECRET") || !strings.Contains(cause, "https://dns.example") {
			t.Errorf("cause = %q", cause)
		}
		// A stray copy of the path alone is hidden too.
		stray := p.entries[0].redactCause(&url.Error{Op: "Post", URL: "/SECRETTOKEN?key=SECRETKEY", Err: poolTestRefusedErr})
		if strings.Contains(stray, "SECRET") {
			t.Errorf("cause = %q", stray)
		}
		// So are the path or the query quoted apart, as an HTTP/2 stream
		// error naming the :path, or a server echoing the query, may.
		for _, text := range []string{"stream error on :path /SECRETTOKEN", "bad parameter key=SECRETKEY"} {
			if got := p.entries[0].redactCause(errors.New(text)); strings.Contains(got, "SECRET") {
				t.Errorf("cause = %q", got)
			}
		}
	})
}

// Issue 29: a client's queries that every upstream refuses (a class, a
// type, a name under the upstream's policy) are evidence about the query,
// not the upstreams: a thousand of them leave both upstreams serving, and
// cost each at most one verification probe per verifyQuiet. An upstream
// that refuses the probe too is refusing us, and its probes, asked for by
// the refused queries, put it in backoff.
func TestPool_refusedQueriesLeaveTheUpstreamToTheProbe(t *testing.T) {
	refuseQuery := func(_ context.Context, m *dns.Msg) (*dns.Msg, error) {
		if poolTestIsProbe(m) {
			return poolTestReply(m, dns.RcodeSuccess), nil
		}
		return poolTestReply(m, dns.RcodeRefused), nil
	}
	t.Run("client-shaped refusals", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			primary, standby := &fakeClient{onExchange: refuseQuery}, &fakeClient{onExchange: refuseQuery}
			p := poolTestNew(t, poolTestShipped, primary, standby)
			p.Start()
			synctest.Wait() // the start-up probes
			for i := range 1000 {
				resp, _, err := p.Resolve(t.Context(), poolTestQuery("a.example."))
				if resp != nil || poolTestKind(err) != KindRcode {
					t.Fatalf("query %d: %v, %v; want the upstreams' refusal", i, resp, err)
				}
				synctest.Wait() // any verification probe it asked for
				time.Sleep(10 * time.Millisecond)
			}
			for i, e := range p.entries {
				if e.health.backoff.Load() || e.backoffs.Load() != 0 || e.failures.Load() != 0 {
					t.Errorf("entry %d: backoff %v, episodes %d, failures %d; want serving, untouched",
						i, e.health.backoff.Load(), e.backoffs.Load(), e.failures.Load())
				}
			}
			// 1000 queries 10 ms apart span 10 s: a verification at most
			// every verifyQuiet, plus the start-up probe.
			if n, most := primary.probes.Load(), int64(10*time.Second/verifyQuiet)+2; n < 2 || n > most {
				t.Errorf("primary probed %d times, want 2..%d", n, most)
			}
		})
	})
	t.Run("an upstream refusing us", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var refusingAll atomic.Bool
			f := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
				if refusingAll.Load() {
					return poolTestReply(m, dns.RcodeRefused), nil
				}
				return refuseQuery(ctx, m)
			}}
			p := poolTestNew(t, poolTestShipped, f)
			p.Start()
			synctest.Wait()
			refusingAll.Store(true) // its ACL changed after it started serving us
			for i := range backoffThreshold {
				if p.entries[0].health.backoff.Load() {
					t.Fatalf("in backoff after %d refused queries, want %d", i, backoffThreshold)
				}
				if _, _, err := p.Resolve(t.Context(), poolTestQuery("a.example.")); poolTestKind(err) != KindRcode {
					t.Fatalf("query %d: %v", i, err)
				}
				synctest.Wait()
			}
			if !p.entries[0].health.backoff.Load() {
				t.Errorf("not in backoff after %d refused probes", backoffThreshold)
			}
		})
	})
}
