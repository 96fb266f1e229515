package history

import (
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Reconfigure applies a reload's [history] settings to the running history
// (SIGHUP), without a restart and without touching DNS: Record keeps
// taking only its short lock while this runs, so queries never wait for
// it (their events buffer meanwhile and go to the new store at its first
// flush).
//
//   - New budgets (MaxBytes, MaxAge) apply in place: a flush right away
//     deletes what the new ones no longer allow. A smaller MaxBytes bounds
//     the file's growth from then on; bbolt does not give back the pages of
//     a file already larger (they are reused).
//   - A new Flush interval restarts the flusher's ticker.
//   - A new Path (a file, another file, or "" for memory) flushes what is
//     buffered into the old store, closes it and opens the new one. A file
//     that cannot be opened degrades the history as at start: it goes on
//     in memory (the memory store it had, if it had one), counted in
//     Problem (and /api/health) and logged once.
//     Leaving memory for a file, the buffered events go to the file
//     instead: in memory they would be lost with it. What the memory store
//     held before is not copied.
//   - The same Path while the history is degraded by a file that did not
//     open tries the file again, so fixing a directory's permissions and
//     sending SIGHUP is enough.
//
// The other Options (MaxPending, Logger, Now) keep their values from Open.
func (h *History) Reconfigure(opts Options) {
	if opts.Flush <= 0 {
		opts.Flush = time.Minute
	}
	opts.MaxBytes = fitBudget(opts.MaxBytes, h.log)
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	budgets := opts.MaxBytes != h.opts.MaxBytes || opts.MaxAge != h.opts.MaxAge
	if opts.Flush != h.opts.Flush {
		h.opts.Flush = opts.Flush
		select { // the loop takes the latest; a stale value waiting is replaced
		case <-h.interval:
		default:
		}
		h.interval <- opts.Flush
	}
	reopen := opts.Path != h.opts.Path || (h.mem && opts.Path != "")
	if !reopen {
		if budgets {
			h.opts.MaxBytes, h.opts.MaxAge = opts.MaxBytes, opts.MaxAge
			h.expiredAt = time.Time{} // the new max_age applies at this flush
			h.kv.setMaxBytes(opts.MaxBytes)
			h.flushLocked()
		}
		return
	}
	if !h.mem {
		h.flushLocked() // what is buffered stays with the store it was meant for
	}
	h.opts.MaxBytes, h.opts.MaxAge = opts.MaxBytes, opts.MaxAge
	h.expiredAt = time.Time{}
	next, mem, err := h.openStore(opts.Path, opts.MaxBytes) // up to a second when another process holds the file
	if err != nil && h.mem {
		// Already in memory: keep that store and what it holds.
		h.opts.Path = opts.Path
		h.degrade(fmt.Sprintf("%v; keeping the history in memory until a reload opens it", err))
		return
	}
	h.storeMu.Lock()
	old := h.kv
	h.kv, h.mem = next, mem
	h.opts.Path = opts.Path
	h.storeMu.Unlock()
	if cerr := old.close(); cerr != nil {
		h.log.Warn("closing the previous history store", zap.Error(cerr))
	}
	if err != nil {
		h.degrade(fmt.Sprintf("%v; keeping the history in memory until a reload opens it", err))
		return
	}
	where := opts.Path
	if where == "" {
		where = "memory"
	}
	h.log.Info("history store changed", zap.String("store", where))
	if p := h.problem.Swap(nil); p != nil {
		h.log.Info("history works again", zap.String("was", *p))
	}
	h.flushLocked() // the events buffered meanwhile, and the budgets on the new store
}
