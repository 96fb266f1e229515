package episodes

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// memStore is a Store in a slice, for the log's unit tests (the real one,
// the history's, has its own tests in internal/history).
type memStore struct {
	mu    sync.Mutex
	saved []Episode
}

func (m *memStore) SaveEpisode(e Episode) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saved = append(m.saved, e)
}

func (m *memStore) RecentEpisodes(n int) ([]Episode, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Episode(nil), m.saved[max(len(m.saved)-n, 0):]...), nil
}

func TestLog_episodeOpensAndEndsOnce(t *testing.T) {
	st := &memStore{}
	l := New(Options{Store: st})
	l.Serving("a", t0, 0) // no episode: nothing to end
	l.Began("a", t0, "network error", "connection refused", 3)
	l.Began("a", t0.Add(time.Second), "attempt timeout", "", 1) // still the same episode
	if got := l.List(); len(got) != 1 || !got[0].Open() || got[0].Cause != "network error" {
		t.Fatalf("open episode: %+v", got)
	}
	if len(st.saved) != 0 {
		t.Fatal("an open episode was stored")
	}
	l.Serving("a", t0.Add(90*time.Second), 5)
	got := l.List()
	if len(got) != 1 || got[0].Open() || got[0].Duration(t0.Add(time.Hour)) != 90*time.Second {
		t.Fatalf("ended episode: %+v", got)
	}
	if len(st.saved) != 1 || st.saved[0].End != t0.Add(90*time.Second) {
		t.Fatalf("stored: %+v", st.saved)
	}
	l.Serving("a", t0.Add(100*time.Second), 0) // ends nothing more
	if len(st.saved) != 1 {
		t.Fatalf("stored twice: %+v", st.saved)
	}
}

func TestLog_episodeSpanningAReloadCountsBothPools(t *testing.T) {
	l := New(Options{})
	l.Began("a", t0, "network error", "", 3)                  // the old pool
	l.Began("a", t0.Add(time.Minute), "network error", "", 1) // the new pool's failed start-up probe
	l.Serving("a", t0.Add(2*time.Minute), 4)                  // the new pool: 1 + 3 probes
	got := l.List()
	if len(got) != 1 || got[0].Failures != 7 || !got[0].Start.Equal(t0) {
		t.Fatalf("%+v: want one episode from t0 with 3+4 failures", got)
	}
}

func TestLog_boundDropsTheOldestEndedFirst(t *testing.T) {
	l := New(Options{Max: 5})
	l.Began("stuck", t0, "network error", "", 3) // open all along
	for i := range 10 {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		u := fmt.Sprint("u", i)
		l.Began(u, at, "attempt timeout", "", 3)
		l.Serving(u, at.Add(time.Second), 3)
	}
	got := l.List()
	if len(got) != 5 {
		t.Fatalf("%d episodes kept, bound 5", len(got))
	}
	if got[0].Upstream != "stuck" || !got[0].Open() {
		t.Errorf("the open episode was dropped: %+v", got[0])
	}
	if got[1].Upstream != "u6" || got[4].Upstream != "u9" {
		t.Errorf("kept %v … %v, want u6 … u9", got[1].Upstream, got[4].Upstream)
	}
}

func TestLog_retainEndsRemovedUpstreamsAndCloseEndsTheRest(t *testing.T) {
	st := &memStore{}
	l := New(Options{Store: st})
	l.Began("gone", t0, "network error", "", 3)
	l.Began("kept", t0, "network error", "", 3)
	l.Retain([]string{"kept"}, t0.Add(time.Minute))
	if len(st.saved) != 1 || st.saved[0].Upstream != "gone" {
		t.Fatalf("after Retain stored %+v", st.saved)
	}
	l.Close(t0.Add(2 * time.Minute))
	if len(st.saved) != 2 || st.saved[1].Upstream != "kept" || !st.saved[1].End.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after Close stored %+v", st.saved)
	}
}

func TestLog_startsFromTheStore(t *testing.T) {
	st := &memStore{}
	for i := range 300 {
		at := t0.Add(time.Duration(i) * time.Minute)
		st.saved = append(st.saved, Episode{Upstream: "a", Start: at, End: at.Add(time.Second)})
	}
	got := New(Options{Store: st}).List()
	if len(got) != DefaultMax || !got[len(got)-1].Start.Equal(t0.Add(299*time.Minute)) {
		t.Fatalf("%d episodes, last %+v", len(got), got[len(got)-1])
	}
}

func TestLog_concurrentUse(t *testing.T) {
	l := New(Options{Store: &memStore{}, Max: 50})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			u := fmt.Sprint("u", g)
			for i := range 200 {
				at := t0.Add(time.Duration(i) * time.Second)
				l.Began(u, at, "network error", "", 3)
				_ = l.List()
				l.Serving(u, at.Add(time.Millisecond), 3)
			}
		})
	}
	wg.Wait()
	got := l.List()
	if len(got) != 50 {
		t.Fatalf("%d episodes, bound 50", len(got))
	}
	for _, e := range got {
		if e.Open() {
			t.Fatalf("open episode left: %+v", e)
		}
	}
}
