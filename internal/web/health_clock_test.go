package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/clock"
)

// TestWithClock: the clock is always reported; an unsynchronized one is
// named as the likely cause of a backoff and changes no status.
func TestWithClock(t *testing.T) {
	unsynced := clock.Reading{State: clock.Unsynchronized, Source: "timesyncd"}
	cases := []struct {
		name       string
		backoff    []bool
		clock      clock.Reading
		want       Status
		clockNamed bool
	}{
		{"unsynced, every upstream answering", []bool{false, false}, unsynced, StatusOK, false},
		{"unsynced, every upstream in backoff", []bool{true, true}, unsynced, StatusError, true},
		{"unsynced, one in backoff", []bool{false, true}, unsynced, StatusDegraded, true},
		{"synchronized, every upstream in backoff", []bool{true, true}, clock.Reading{State: clock.Synchronized, Source: "kernel"}, StatusError, false},
		{"unknown, every upstream in backoff", []bool{true, true}, clock.Reading{State: clock.Unknown}, StatusError, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := HealthFrom(poolOf(c.backoff...), serverSnapshotBusy(), 2).WithClock(c.clock)
			if h.Status != c.want {
				t.Errorf("status %q, want %q", h.Status, c.want)
			}
			if h.Clock != (ClockHealth{State: c.clock.State, Source: c.clock.Source}) {
				t.Errorf("clock %+v, want %+v", h.Clock, c.clock)
			}
			named := strings.Contains(strings.Join(h.Problems, "\n"), "clock is not synchronized (")
			if named != c.clockNamed {
				t.Errorf("problems %q: clock named %v, want %v", h.Problems, named, c.clockNamed)
			}
		})
	}
}

func TestWithClock_JSON(t *testing.T) {
	h := HealthFrom(poolOf(true), serverSnapshotBusy(), 1).WithClock(clock.Reading{State: clock.Unsynchronized, Source: "timesyncd"})
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"clock":{"state":"unsynchronized","source":"timesyncd"}`) {
		t.Errorf("JSON %s lacks the clock", b)
	}
}
