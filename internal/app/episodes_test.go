package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// flaky is a real DoT upstream on loopback (internal/testutil) that
// answers REFUSED while failing is set: a peer fault the pool counts, so
// its start-up probe puts it in backoff and a later probe brings it back.
type flaky struct {
	srv     *testutil.DoTServer
	failing atomic.Bool
}

func startFlaky(t *testing.T, r *rig) *flaky {
	f := &flaky{}
	answer := testutil.AnswerA("192.0.2.7")
	f.srv = testutil.StartDoT(t, r.ca, "flaky.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		if f.failing.Load() {
			m := new(dns.Msg)
			m.SetRcode(q, dns.RcodeRefused)
			return m
		}
		return answer(ctx, q)
	})
	return f
}

func (f *flaky) url() string { return "tls://" + f.srv.Addr.String() }

// flakyConfig is a configuration whose one upstream is f, with DNS and the
// web endpoint on loopback and the history at historyPath ("" in memory).
func flakyConfig(t *testing.T, r *rig, f *flaky, historyPath string) (cfg config.Config, webBase string) {
	t.Helper()
	webPort := testutil.FreePort(t)
	text := fmt.Sprintf(`[dns]
listen = [%q]
[web]
listen = "127.0.0.1:%d"
[log]
queries = false
[history]
path = %q
[[upstreams]]
url = %q
tls_name = %q
ca_file = %q
`, loopbackAddr(t), webPort, historyPath, f.url(), f.srv.Name, r.caFile)
	cfg, err := config.LoadFile(r.write(t, text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg, fmt.Sprintf("http://127.0.0.1:%d", webPort)
}

// episodesOf is the App's episodes of url.
func episodesOf(a *App, url string) []episodes.Episode {
	var out []episodes.Episode
	for _, e := range a.episodes.List() {
		if e.Upstream == url {
			out = append(out, e)
		}
	}
	return out
}

func waitEpisode(t *testing.T, a *App, url string, open bool) episodes.Episode {
	t.Helper()
	var last episodes.Episode
	testutil.WaitFor(t, fmt.Sprintf("an episode of %s (open %v)", url, open), 15*time.Second, func() bool {
		eps := episodesOf(a, url)
		if len(eps) == 0 {
			return false
		}
		last = eps[len(eps)-1]
		return last.Open() == open
	})
	return last
}

// upstreamsAPI reads GET /api/upstreams.
func upstreamsAPI(t *testing.T, base string) (u struct {
	Upstreams []struct {
		URL      string `json:"url"`
		Episodes []struct {
			Ongoing   bool    `json:"ongoing"`
			End       *string `json:"end"`
			DurationS float64 `json:"duration_s"`
			Cause     string  `json:"cause"`
		} `json:"episodes"`
	} `json:"upstreams"`
}) {
	t.Helper()
	if err := json.Unmarshal([]byte(get(t, base+"/api/upstreams", http.StatusOK)), &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestEpisodes_failingUpstreamOpensAnEpisodeAndRecoveryClosesIt: a real
// upstream refusing from the start is in backoff after its first probe:
// an open episode, shown as ongoing by the API and the page. Once it
// answers, the prober's next probe (within 2 s) ends it, with the
// duration it lasted.
func TestEpisodes_failingUpstreamOpensAnEpisodeAndRecoveryClosesIt(t *testing.T) {
	r := newRig(t)
	f := startFlaky(t, r)
	f.failing.Store(true)
	cfg, base := flakyConfig(t, r, f, "")
	began := time.Now()
	a := r.start(t, cfg)

	open := waitEpisode(t, a, f.url(), true)
	if open.Cause != "upstream refused the query" || open.Start.Before(began) || open.Failures < 1 {
		t.Fatalf("open episode %+v", open)
	}
	u := upstreamsAPI(t, base)
	if len(u.Upstreams) != 1 || len(u.Upstreams[0].Episodes) != 1 || !u.Upstreams[0].Episodes[0].Ongoing || u.Upstreams[0].Episodes[0].End != nil {
		t.Fatalf("API while in backoff: %+v", u)
	}
	if page := get(t, base+"/upstreams", http.StatusOK); !strings.Contains(page, `<tr class="ongoing">`) || !strings.Contains(page, `class="backoff ongoing"`) {
		t.Fatal("the page does not mark the ongoing episode")
	}

	time.Sleep(300 * time.Millisecond) // the outage lasts at least this long
	f.failing.Store(false)
	recovered := time.Now()
	ended := waitEpisode(t, a, f.url(), false)
	took := ended.End.Sub(ended.Start)
	if took < 300*time.Millisecond || took > time.Since(began) || ended.End.Before(recovered) {
		t.Fatalf("episode %+v lasted %v: want at least the 300 ms outage, at most the test", ended, took)
	}
	u = upstreamsAPI(t, base)
	if e := u.Upstreams[0].Episodes[0]; e.Ongoing || e.End == nil || e.DurationS < 0.3 || e.Cause != open.Cause {
		t.Fatalf("API after recovery: %+v", e)
	}
	if got := len(episodesOf(a, f.url())); got != 1 {
		t.Fatalf("%d episodes, want 1", got)
	}
	ask(t, cfg.DNS.Listen[0], "back.example.") // and it serves
}

// TestEpisodes_surviveAReloadAndARestart: an episode open when a reload
// replaces the pool goes on in the new generation (one episode, the same
// start) and ends when the new pool's prober sees the upstream back; with
// history.path it is still there after a restart, read back from the file.
func TestEpisodes_surviveAReloadAndARestart(t *testing.T) {
	r := newRig(t)
	f := startFlaky(t, r)
	f.failing.Store(true)
	path := r.dir + "/history.db"
	cfg, base := flakyConfig(t, r, f, path)
	a, err := Start(cfg, Options{Logger: r.log})
	if err != nil {
		t.Fatal(err)
	}
	open := waitEpisode(t, a, f.url(), true)

	if err := a.Reload(cfg); err != nil { // a new generation: a new pool, probing again
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the new pool's first probe", 5*time.Second, func() bool {
		s := a.gen.Load().pool.Snapshot().Upstreams[0]
		return s.ProbeFailures > 0
	})
	if eps := episodesOf(a, f.url()); len(eps) != 1 || !eps[0].Open() || !eps[0].Start.Equal(open.Start) {
		t.Fatalf("after the reload: %+v, want the one episode still open", eps)
	}
	f.failing.Store(false)
	ended := waitEpisode(t, a, f.url(), false)
	if !ended.Start.Equal(open.Start) || len(episodesOf(a, f.url())) != 1 {
		t.Fatalf("after recovery: %+v", episodesOf(a, f.url()))
	}
	shutdown(t, a)

	b := r.start(t, cfg)
	eps := episodesOf(b, f.url())
	if len(eps) != 1 || !eps[0].Start.Equal(open.Start) || !eps[0].End.Equal(ended.End) || eps[0].Cause != ended.Cause {
		t.Fatalf("after a restart: %+v, want %+v", eps, ended)
	}
	if u := upstreamsAPI(t, base); len(u.Upstreams[0].Episodes) != 1 || u.Upstreams[0].Episodes[0].Ongoing {
		t.Fatalf("API after a restart: %+v", u)
	}
}

// TestEpisodes_removedUpstreamsEpisodeEndsAtTheReload: nothing would end
// the episode of an upstream the new configuration dropped.
func TestEpisodes_removedUpstreamsEpisodeEndsAtTheReload(t *testing.T) {
	r := newRig(t)
	f := startFlaky(t, r)
	f.failing.Store(true)
	cfg, _ := flakyConfig(t, r, f, "")
	a := r.start(t, cfg)
	waitEpisode(t, a, f.url(), true)

	next := cfg
	next.Upstreams = r.config(t, cfg.DNS.Listen[0], false).Upstreams // the rig's healthy upstream instead
	reloaded := time.Now()
	if err := a.Reload(next); err != nil {
		t.Fatal(err)
	}
	eps := episodesOf(a, f.url())
	if len(eps) != 1 || eps[0].Open() || eps[0].End.Before(reloaded) {
		t.Fatalf("after the reload: %+v, want the episode ended at it", eps)
	}
}

// TestEpisodes_retiredGenerationReportsNothing: the old pool, draining
// after a reload, may still fail; that must not open an episode that the
// new pool (already serving) would never end.
func TestEpisodes_retiredGenerationReportsNothing(t *testing.T) {
	log := episodes.New(episodes.Options{})
	h := newPoolHealth(log)
	h.observer().BackoffChanged(upstream.BackoffEvent{Upstream: "u", At: time.Now(), Backoff: true, Cause: upstream.KindNetwork, Failures: 3})
	if len(log.List()) != 1 {
		t.Fatal("a live generation's episode was not recorded")
	}
	log.Serving("u", time.Now(), 3)
	h.retired.Store(true)
	h.observer().BackoffChanged(upstream.BackoffEvent{Upstream: "u", At: time.Now(), Backoff: true, Cause: upstream.KindNetwork, Failures: 3})
	if eps := log.List(); len(eps) != 1 || eps[0].Open() {
		t.Fatalf("a retired generation opened an episode: %+v", eps)
	}
	if newPoolHealth(nil).observer() != nil {
		t.Error("no log must mean no observer (a nil interface, not a typed nil)")
	}
}
