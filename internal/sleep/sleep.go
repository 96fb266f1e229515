// Package sleep is the one wait for a duration that a context can cut
// short. It imports nothing of nxdns's, so every package — the product's and
// the test tools' (internal/fakeup, internal/burst) alike — can use it
// without an import cycle.
package sleep

import (
	"context"
	"time"
)

// For waits d and reports whether it did: false means ctx ended first (or
// had already ended), and the caller should stop. The timer is released
// either way. A d of zero or less waits nothing and reports whether ctx is
// still live.
func For(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
