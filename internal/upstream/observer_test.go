package upstream

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// recordingObserver keeps the events it hears.
type recordingObserver struct {
	mu  sync.Mutex
	evs []BackoffEvent
}

func (o *recordingObserver) BackoffChanged(ev BackoffEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.evs = append(o.evs, ev)
}

func (o *recordingObserver) events() []BackoffEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]BackoffEvent(nil), o.evs...)
}

// The observer hears each episode once each way, with the fault class that
// began it, the failures, and times an episode's length can be read from;
// the queries and probes in between add nothing.
func TestObserver_hearsEachEpisodeOnceEachWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &recordingObserver{}
		var refusing atomic.Bool
		refusing.Store(true)
		f := &fakeClient{onExchange: func(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
			if refusing.Load() {
				return poolTestRefuse(ctx, m)
			}
			return poolTestAnswer(ctx, m)
		}}
		opts := poolTestShipped
		opts.Observer = obs
		p := poolTestNew(t, opts, f)
		p.Start()
		synctest.Wait() // the start-up probe failed: backoff
		began := time.Now()
		time.Sleep(30 * time.Second) // probes on the schedule, all refused
		refusing.Store(false)
		time.Sleep(backoffMax + probeTimeout)
		synctest.Wait()

		evs := obs.events()
		if len(evs) != 2 {
			t.Fatalf("events %+v, want one each way", evs)
		}
		in, out := evs[0], evs[1]
		if !in.Backoff || in.Upstream != poolTestURL(0) || in.Cause != KindNetwork || in.Failures != 1 || !in.At.Equal(began) {
			t.Errorf("entering: %+v", in)
		}
		if in.Detail == "" {
			t.Error("entering without a detail")
		}
		if out.Backoff || out.Upstream != poolTestURL(0) || out.Failures < 3 {
			t.Errorf("leaving: %+v", out)
		}
		if d := out.At.Sub(in.At); d < 30*time.Second || d > 30*time.Second+backoffMax+probeTimeout {
			t.Errorf("episode lasted %v", d)
		}
		if n := p.Snapshot().Upstreams[0].BackoffEpisodes; n != 1 {
			t.Errorf("BackoffEpisodes = %d, want 1", n)
		}
	})
}

// A pool whose first probe succeeds says so, so that an observer holding
// an episode of the same upstream from a previous pool can end it.
func TestObserver_firstProbeSuccessAnnouncesServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := &recordingObserver{}
		opts := poolTestShipped
		opts.Observer = obs
		p := poolTestNew(t, opts, &fakeClient{onExchange: poolTestAnswer})
		p.Start()
		synctest.Wait()
		evs := obs.events()
		if len(evs) != 1 || evs[0].Backoff || evs[0].Upstream != poolTestURL(0) {
			t.Fatalf("events %+v, want one serving", evs)
		}
	})
}
