package history

import (
	"encoding/binary"
	"math"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/episodes"
)

func TestEpisodes_storedAcrossARestartAndDeletedByAge(t *testing.T) {
	c := &clock{now: t0}
	path := filePath(t)
	h := openTest(t, path, c, nil)
	old := episodes.Episode{Upstream: "tls://192.0.2.1:853", Start: t0.Add(-40 * 24 * time.Hour), End: t0.Add(-35 * 24 * time.Hour), Cause: "network error", Failures: 9}
	recent := episodes.Episode{Upstream: "tls://192.0.2.2:853", Start: t0.Add(-time.Hour), End: t0.Add(-50 * time.Minute), Cause: "attempt timeout", Detail: "<b>no answer</b>", Failures: 4}
	h.SaveEpisode(old)
	h.SaveEpisode(recent)
	if got, _ := h.RecentEpisodes(10); len(got) != 2 {
		t.Fatalf("buffered episodes: %d, want 2 (searchable before the flush)", len(got))
	}
	h.Flush() // max_age is 30 days: old goes
	h.Close()
	h = openTest(t, path, c, nil)
	got, err := h.RecentEpisodes(10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("after a restart: %+v, want only the recent episode", got)
	}
	g := got[0]
	if g.Upstream != recent.Upstream || !g.Start.Equal(recent.Start) || !g.End.Equal(recent.End) ||
		g.Cause != recent.Cause || g.Detail != recent.Detail || g.Failures != recent.Failures {
		t.Fatalf("round trip: %+v, want %+v", g, recent)
	}
}

func TestEpisodes_recentReturnsTheLastN(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, "", c, nil)
	for i := range 10 {
		at := t0.Add(time.Duration(i) * time.Minute)
		h.SaveEpisode(episodes.Episode{Upstream: "u", Start: at.Add(-time.Second), End: at, Failures: i})
		if i == 6 {
			h.Flush() // some stored, some buffered
		}
	}
	got, err := h.RecentEpisodes(3)
	if err != nil || len(got) != 3 {
		t.Fatalf("%v, %d episodes", err, len(got))
	}
	for i, e := range got {
		if e.Failures != 7+i {
			t.Errorf("episode %d has failures %d, want %d (the last three, oldest first)", i, e.Failures, 7+i)
		}
	}
}

// TestDecodeEpisode_hugeFailureCountStaysPositive: a stored count past any
// int (a damaged value) decodes to the largest count every architecture
// holds, never to a negative one (1<<31 wrapped on 32-bit builds).
func TestDecodeEpisode_hugeFailureCountStaysPositive(t *testing.T) {
	e := episodes.Episode{Start: t0, End: t0.Add(time.Minute), Upstream: "tls://192.0.2.53:853", Cause: "timeout"}
	v := encodeEpisode(e) // Failures 0: the last byte is its uvarint
	v = binary.AppendUvarint(v[:len(v)-1], 1<<40)
	got, ok := decodeEpisode(episodeKey(e), v)
	if !ok || got.Failures != math.MaxInt32 {
		t.Errorf("decoded ok=%v failures=%d, want ok and %d", ok, got.Failures, math.MaxInt32)
	}
}
