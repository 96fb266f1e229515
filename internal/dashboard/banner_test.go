package dashboard

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/web"
)

// TestBanner_saysEachDegradationInAHouseholdsWords: each condition of the
// health gives its line, linking to the page that explains it; every
// upstream in backoff is an error line; a healthy nxdns shows none.
func TestBanner_saysEachDegradationInAHouseholdsWords(t *testing.T) {
	ok := web.Health{Listeners: web.ListenersHealth{Up: 1}, Upstreams: web.UpstreamsHealth{Enabled: 2}}
	if got := bannerFrom(ok); len(got) != 0 {
		t.Fatalf("healthy: %+v", got)
	}
	down := ok
	down.Upstreams.InBackoff = 2
	down.Clock = web.ClockHealth{State: clock.Unsynchronized, Source: "timesyncd"}
	down.Lists = &web.ListsHealth{Configured: 2, Stale: []string{"ads"}}
	down.History = &web.HistoryHealth{Store: "memory", Problem: "open: permission denied"}
	got := bannerFrom(down)
	want := []struct{ text, href string }{
		{"cannot reach any of its DNS providers", "/upstreams"},
		{"clock is not set yet", "/upstreams"},
		{"block lists are out of date (ads)", "/lists"},
		{"query log is kept in memory only", "/queries"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.Contains(got[i].Text, w.text) || got[i].Href != w.href {
			t.Errorf("line %d: %+v, want %q linking %s", i, got[i], w.text, w.href)
		}
	}
	if !got[0].Error || got[1].Error {
		t.Errorf("only the upstreams' line is an error: %+v", got)
	}
	some := ok
	some.Upstreams.InBackoff = 1 // the other still answers: nothing a household notices
	if got := bannerFrom(some); len(got) != 0 {
		t.Errorf("one of two upstreams in backoff: %+v", got)
	}
}

// TestBanner_fragmentAndEveryPage: /status/banner is the banner alone,
// and the layout of every page carries the same lines.
func TestBanner_fragmentAndEveryPage(t *testing.T) {
	h := history.Open(history.Options{MaxBytes: 1 << 20, MaxAge: time.Hour, Flush: time.Hour})
	t.Cleanup(func() { h.Close() })
	down := web.Health{Listeners: web.ListenersHealth{Up: 1}, Upstreams: web.UpstreamsHealth{Enabled: 1, InBackoff: 1}}
	d := New(Deps{History: h, Health: func() web.Health { return down }})
	for _, path := range []string{"/status/banner", "/lists", "/cache", "/changes", "/upstreams"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", path, nil)
		req.SetPathValue("client", "")
		d.pageRoutes()["GET "+path](rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusOK || !strings.Contains(body, `<p class="error">Websites may not open`) || !strings.Contains(body, `<a href="/upstreams">`) {
			t.Errorf("%s: %d without the banner line:\n%.400s", path, rec.Code, body)
		}
	}
}
