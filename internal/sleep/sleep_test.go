package sleep

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// Run in a synctest bubble: its clock is fake, so the durations below are
// exact and cost no real time.

func TestFor_waitsTheWholeDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !For(t.Context(), time.Hour) {
			t.Fatal("For reported a cut-short wait on a live context")
		}
		if got := time.Since(start); got != time.Hour {
			t.Errorf("waited %v, want 1h", got)
		}
	})
}

func TestFor_returnsWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Minute, cancel)
		start := time.Now()
		if For(ctx, time.Hour) {
			t.Fatal("For reported a whole wait although the context ended")
		}
		if got := time.Since(start); got != time.Minute {
			t.Errorf("returned after %v, want when the context ended (1m)", got)
		}
	})
}

func TestFor_nothingToWait(t *testing.T) {
	if !For(t.Context(), 0) || !For(t.Context(), -time.Second) {
		t.Error("a wait of zero or less on a live context reported false")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if For(ctx, 0) || For(ctx, time.Hour) {
		t.Error("a wait on an ended context reported true")
	}
}
