package web

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

func poolOf(backoff ...bool) upstream.Snapshot {
	var s upstream.Snapshot
	for i, b := range backoff {
		s.Upstreams = append(s.Upstreams, upstream.UpstreamSnapshot{
			Index: i, URL: []string{dotURL, redactedDoH, "tls://192.0.2.3:853"}[i], InBackoff: b,
		})
	}
	return s
}

func serverSnapshotBusy() server.Snapshot { return server.Snapshot{UDPInFlight: 3, TCPConns: 1} }

// TestHealthFrom: the status rules, each case one rule.
func TestHealthFrom(t *testing.T) {
	cases := []struct {
		name      string
		pool      upstream.Snapshot
		listeners int
		want      Status
		code      int
		inBackoff int
	}{
		{"all healthy", poolOf(false, false), 2, StatusOK, 200, 0},
		{"one of two in backoff", poolOf(false, true), 2, StatusDegraded, 200, 1},
		{"two of three in backoff", poolOf(true, false, true), 1, StatusDegraded, 200, 2},
		{"every upstream in backoff", poolOf(true, true), 2, StatusError, 503, 2},
		{"the only upstream in backoff", poolOf(true), 2, StatusError, 503, 1},
		{"no listener up", poolOf(false, false), 0, StatusError, 503, 0},
		{"no listener and one in backoff", poolOf(false, true), 0, StatusError, 503, 1},
		{"no upstream", upstream.Snapshot{}, 1, StatusError, 503, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := HealthFrom(c.pool, server.Snapshot{UDPInFlight: 3, TCPConns: 1}, c.listeners)
			if h.Status != c.want || h.HTTPStatus() != c.code {
				t.Errorf("status %q (HTTP %d), want %q (%d)", h.Status, h.HTTPStatus(), c.want, c.code)
			}
			if h.Upstreams.Enabled != len(c.pool.Upstreams) || h.Upstreams.InBackoff != c.inBackoff || len(h.Upstreams.Backoff) != c.inBackoff {
				t.Errorf("upstreams %+v, want %d enabled, %d in backoff", h.Upstreams, len(c.pool.Upstreams), c.inBackoff)
			}
			if h.Listeners != (ListenersHealth{Up: c.listeners, UDPInFlight: 3, TCPConnections: 1}) {
				t.Errorf("listeners %+v", h.Listeners)
			}
			if (h.Status == StatusOK) != (len(h.Problems) == 0) {
				t.Errorf("problems %q with status %q: every non-ok status says why, ok says nothing", h.Problems, h.Status)
			}
		})
	}
}

// TestHealthFrom_redactsBackoffURLs: the list of upstreams in backoff shows
// scheme, host and port only, whatever the snapshot held.
func TestHealthFrom_redactsBackoffURLs(t *testing.T) {
	pool := upstream.Snapshot{Upstreams: []upstream.UpstreamSnapshot{{URL: secretURL, InBackoff: true}}}
	h := HealthFrom(pool, server.Snapshot{}, 1)
	if !slices.Equal(h.Upstreams.Backoff, []string{redactedDoH}) {
		t.Errorf("backoff %q, want [%s]", h.Upstreams.Backoff, redactedDoH)
	}
}

// TestHealth_followsBackoffOverHTTP drives a real pool: failures put the
// primary in backoff (degraded, 200), then the standby (error, 503), and a
// success in the last-resort pass brings the primary back (degraded).
func TestHealth_followsBackoffOverHTTP(t *testing.T) {
	primary, standby := newFake(dotURL), newFake(secretURL)
	pool := newPool(t, upstream.Options{Attempt: 2 * time.Second, Total: 4 * time.Second, Slots: 32}, primary, standby)
	s := startWeb(t, nil, func() Health { return HealthFrom(pool.Snapshot(), server.Snapshot{}, 1) })
	resolve := func(name string, n int) {
		for range n {
			pool.Resolve(context.Background(), newQuery(name))
		}
	}
	check := func(step string, want Status, code, inBackoff int) {
		t.Helper()
		status, hdr, body := get(t, s, "/api/health")
		var h Health
		if err := json.Unmarshal(body, &h); err != nil {
			t.Fatalf("%s: body %q: %v", step, body, err)
		}
		if status != code || h.Status != want || h.Upstreams.Enabled != 2 || h.Upstreams.InBackoff != inBackoff {
			t.Errorf("%s: HTTP %d %s, want %d with status %q, 2 enabled, %d in backoff", step, status, body, code, want, inBackoff)
		}
		if ct := hdr.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", step, ct)
		}
		if strings.Contains(string(body), secretMarker) {
			t.Errorf("%s: health shows the DoH token: %s", step, body)
		}
	}

	check("start", StatusOK, http.StatusOK, 0)
	primary.fails.Store(true)
	resolve("ok.example.", 3) // the primary fails each, the standby answers
	check("primary in backoff", StatusDegraded, http.StatusOK, 1)
	standby.fails.Store(true)
	resolve("ok.example.", 3) // the standby fails, then the last resort fails too
	check("both in backoff", StatusError, http.StatusServiceUnavailable, 2)
	primary.fails.Store(false)
	resolve("ok.example.", 1) // last-resort pass, in priority order: the primary answers
	check("primary recovered", StatusDegraded, http.StatusOK, 1)
}

func TestHealth_historyProblemDegradesButNeverErrors(t *testing.T) {
	ok := HealthFrom(upstream.Snapshot{Upstreams: []upstream.UpstreamSnapshot{{URL: "tls://192.0.2.1:853"}}}, server.Snapshot{}, 1)
	if h := ok.WithHistory("file", ""); h.Status != StatusOK || h.History.Status != StatusOK {
		t.Fatalf("no problem: %+v", h)
	}
	h := ok.WithHistory("memory", "open /var/lib/nxdns/history.db: read-only file system")
	if h.Status != StatusDegraded || h.History.Status != StatusDegraded || h.HTTPStatus() != 200 {
		t.Fatalf("history problem: status %s history %+v code %d", h.Status, h.History, h.HTTPStatus())
	}
	bad := HealthFrom(upstream.Snapshot{}, server.Snapshot{}, 0).WithHistory("file", "disk full")
	if bad.Status != StatusError {
		t.Fatalf("a history problem hid an error: %s", bad.Status)
	}
}

func TestHealth_staleListsDegrade(t *testing.T) {
	ok := HealthFrom(poolOf(false, false), serverSnapshotBusy(), 1)
	if ok.Status != StatusOK {
		t.Fatalf("precondition: %s", ok.Status)
	}
	if h := ok.WithLists(0, nil); h.Lists != nil || h.Status != StatusOK {
		t.Errorf("no lists: %+v", h)
	}
	if h := ok.WithLists(2, nil); h.Lists == nil || h.Lists.Configured != 2 || h.Status != StatusOK {
		t.Errorf("fresh lists: %+v", h)
	}
	h := ok.WithLists(2, []string{"ads (never loaded)"})
	if h.Status != StatusDegraded || len(h.Problems) != 1 || h.HTTPStatus() != 200 {
		t.Errorf("a stale list: %+v", h)
	}
	bad := HealthFrom(poolOf(true, true), serverSnapshotBusy(), 1).WithLists(1, []string{"x"})
	if bad.Status != StatusError {
		t.Errorf("a stale list hid an error: %s", bad.Status)
	}
}
