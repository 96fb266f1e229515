package clock

import (
	"context"
	"sync/atomic"
	"time"
)

// Watcher polls a Source and reports each change of state. Polling, not
// inotify: timesyncd's directory comes and goes with the service, and one
// stat every few seconds costs nothing.
//
// Guarantee: Current is safe from any goroutine and always returns the last
// reading; changed is called from Run's goroutine only, once per change of
// State, in order, with the previous and the new reading.
type Watcher struct {
	src   Source
	every time.Duration
	cur   atomic.Pointer[Reading]
}

// NewWatcher reads src once, so Current is meaningful before Run starts.
func NewWatcher(src Source, every time.Duration) *Watcher {
	w := &Watcher{src: src, every: every}
	r := src.Read()
	w.cur.Store(&r)
	return w
}

// Current is the last reading.
func (w *Watcher) Current() Reading { return *w.cur.Load() }

// Run reads the source every interval until ctx ends, calling changed (if
// not nil) when the state differs from the previous reading.
func (w *Watcher) Run(ctx context.Context, changed func(old, new Reading)) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r := w.src.Read()
		old := w.cur.Swap(&r)
		if old.State != r.State && changed != nil {
			changed(*old, r)
		}
	}
}
