package stats

import (
	"sync"
	"testing"
	"time"
)

func TestHistogramCumulativeBuckets(t *testing.T) {
	var h Histogram
	h.Observe(300 * time.Microsecond) // ≤ 0.5 ms
	h.Observe(time.Millisecond)       // exactly on a bound: ≤ 1 ms
	h.Observe(30 * time.Millisecond)  // ≤ 50 ms
	h.Observe(10 * time.Second)       // +Inf only
	s := h.Snapshot()
	if s.Count != 4 {
		t.Fatalf("count = %d, want 4", s.Count)
	}
	for ub, want := range map[float64]uint64{0.0005: 1, 0.001: 2, 0.025: 2, 0.05: 3, 5: 3} {
		if got := s.Buckets[ub]; got != want {
			t.Errorf("bucket ≤%v = %d, want %d", ub, got, want)
		}
	}
	if want := 10.0313; s.Sum < want-1e-6 || s.Sum > want+1e-6 {
		t.Errorf("sum = %v s, want %v", s.Sum, want)
	}
}

func TestHistogramConcurrentObserve(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				h.Observe(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if got := h.Snapshot().Count; got != 8000 {
		t.Fatalf("count = %d, want 8000", got)
	}
}
