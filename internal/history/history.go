// Package history keeps the query events for the dashboard and the API
// (docs/design.md#history): a query.Sink whose Record only copies the event into
// a bounded buffer, a flusher that writes the buffer in one transaction per
// interval into an embedded store (a bbolt file, or memory without a path),
// pre-aggregated minute and hour buckets for the overview, and byte and age
// budgets that delete the oldest rows first.
//
// Nothing here can affect DNS: Record never blocks (a full buffer drops and
// counts), and a store that cannot be opened or written degrades the
// history alone — counted, logged once, reported by Problem for
// /api/health.
package history

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
)

// DefaultMaxPending bounds the events held between two flushes. At about
// 150 bytes each (their stored form) that is under 10 MB; a household sends a few thousand
// queries a minute at its busiest, so only a flood fills it, and then the
// flood's excess is dropped and counted, never a query.
const DefaultMaxPending = 50_000

// Budget thresholds: past pruneAt of max_bytes the flush deletes the oldest
// rows down to pruneTo, so the next intervals fit before the file's hard
// bound (bbolt refuses to grow past max_bytes).
const (
	pruneAt = 0.85
	pruneTo = 0.75
)

// Options configure a History.
type Options struct {
	Path       string        // bbolt file; "" keeps the history in memory
	MaxBytes   int64         // the store's byte budget
	MaxAge     time.Duration // rows older than this are deleted
	Flush      time.Duration // one write transaction per interval
	MaxPending int           // events buffered between flushes; 0 means DefaultMaxPending
	Logger     *zap.Logger
	Now        func() time.Time // tests; nil means time.Now
	// Precheck, when set, checks an existing file before this process
	// opens it (check.go: ExecCheck runs CheckFile in a child process). A
	// result wrapping ErrCorrupt moves the file aside and starts a fresh
	// store; any other error keeps the history in memory, the file left
	// in place.
	Precheck func(path string) error
}

// History is the store and its flusher. It is owned by the composition root
// and outlives configuration reloads; each generation hands it the events.
type History struct {
	opts Options // Path and the budgets change under flushMu (Reconfigure); the rest never
	log  *zap.Logger

	// storeMu guards kv and mem: reads (searches, the overview, the
	// counters) hold it shared, and only Reconfigure's swap of the store
	// takes it exclusively. Writes also hold flushMu, which the swap holds.
	storeMu sync.RWMutex
	kv      kv
	mem     bool // the store is in memory (no path, or the file failed to open)

	mu          sync.Mutex // guards the fields below; Record holds it for an append
	pending     []buffered
	inflight    []buffered // the batch being written; still searchable
	pendingEps  []buffered // ended backoff episodes (episodes.go)
	inflightEps []buffered
	seq         uint32
	full        atomic.Bool // len(pending) reached MaxPending; read without mu by Record

	flushMu   sync.Mutex         // one flush at a time (the ticker, Flush, Close, Reconfigure); guards lastWrite and opts
	lastWrite int64              // bytes the last successful flush wrote, for prune's headroom
	expiredAt time.Time          // when the file store's last age expiry committed (expireEvery); zero: at the next flush
	expiring  time.Time          // the expiry in the transaction being written; expiredAt once it commits
	interval  chan time.Duration // a new flush interval for the loop (Reconfigure)

	recorded     atomic.Int64
	dropped      atomic.Int64 // buffer full
	lost         atomic.Int64 // written in a batch that failed
	bytesWritten atomic.Int64
	writeErrors  atomic.Int64
	flushes      atomic.Int64
	pruned       atomic.Int64 // rows deleted by the budgets

	problem atomic.Pointer[string] // why the history is degraded; nil when it is not
	moved   atomic.Pointer[string] // a damaged file moved aside at open (precheck); kept until restart

	stop chan struct{}
	done sync.WaitGroup
	once sync.Once
}

// buffered is an event between Record and its flush, already in its
// stored form: about 150 bytes instead of a Row's 400 and its strings, so
// a full buffer stays a few MB.
type buffered struct {
	key, val []byte
}

// pendingRow is a decoded row with its key (search results).
type pendingRow struct {
	key []byte
	row Row
}

var _ query.Sink = (*History)(nil)

// Open starts the history. It never fails: a file that cannot be opened (a
// read-only directory, a corrupt store, another process holding it) leaves
// the history in memory, with the reason in Problem.
func Open(opts Options) *History {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = DefaultMaxPending
	}
	if opts.Flush <= 0 {
		opts.Flush = time.Minute
	}
	h := &History{opts: opts, log: opts.Logger.Named("history"), stop: make(chan struct{}), interval: make(chan time.Duration, 1)}
	h.opts.MaxBytes = fitBudget(opts.MaxBytes, h.log)
	var err error
	h.kv, h.mem, err = h.openStore(h.opts.Path, h.opts.MaxBytes)
	if err != nil {
		h.degrade(fmt.Sprintf("%v; keeping the history in memory until restart or a reload that opens it", err))
	}
	h.done.Go(func() { h.loop(opts.Flush) })
	return h
}

// openStore is the store for path: a bbolt file, or memory for "" or for a
// file that cannot be opened (then err says why).
func (h *History) openStore(path string, maxBytes int64) (kv, bool, error) {
	if path == "" {
		return newMem(), true, nil
	}
	if err := h.precheck(path); err != nil {
		return newMem(), true, fmt.Errorf("history: %w", err)
	}
	k, err := safeOpenBolt(path, maxBytes)
	if err != nil {
		return newMem(), true, err
	}
	return k, false, nil
}

// precheck runs Options.Precheck on an existing, non-empty file. A damaged
// one is moved aside, so the open that follows starts a fresh store in its
// place, and the move is logged and kept for Problem until restart: the
// history it held is gone from the dashboard, and the operator should
// know (the moved file stays for a look).
func (h *History) precheck(path string) error {
	if h.opts.Precheck == nil {
		return nil
	}
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil // nothing to check: the open says what is wrong, or creates the file
	}
	err := h.opts.Precheck(path)
	if !errors.Is(err, ErrCorrupt) {
		return err
	}
	aside, qerr := quarantine(path, h.opts.Now())
	if qerr != nil {
		return fmt.Errorf("%s is damaged (%v), and %v", path, err, qerr)
	}
	note := fmt.Sprintf("%s was damaged (%v); moved aside to %s, a fresh store started in its place", path, err, aside)
	h.moved.Store(&note)
	h.log.Error("history file damaged; moved aside and started afresh, DNS is not affected",
		zap.String("file", path), zap.String("moved_to", aside), zap.String("problem", err.Error()))
	return nil
}

// safeOpenBolt turns a panic inside bbolt (a page of garbage can trip its
// assertions) into an error: a corrupt file must not take DNS down.
func safeOpenBolt(path string, maxBytes int64) (k *boltKV, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("history: %s: corrupt store: %v", path, p)
		}
	}()
	return openBolt(path, maxBytes)
}

var _ query.EventCopier = (*History)(nil)

// CopiesEvents makes History a query.EventCopier: Record encodes the event
// into a row of its own and keeps no reference to it.
func (h *History) CopiesEvents() {}

// Record buffers one event (query.Sink). It copies what it keeps, takes a
// short lock and returns; a full buffer drops the event and counts it.
func (h *History) Record(e *query.Event) {
	if h.full.Load() {
		// Checked before the row is made: at a sustained rate above what a
		// flush interval holds, encoding rows only to drop them was most of
		// the garbage a cache hit left behind.
		h.dropped.Add(1)
		return
	}
	r := fromEvent(e)
	// One allocation for the key and the row: the key's sequence number is
	// known only under the lock.
	b := appendRow(make([]byte, keyLen, keyLen+rowSizeHint(&r)), &r)
	key, val := b[:keyLen:keyLen], b[keyLen:]
	h.mu.Lock()
	if len(h.pending) >= h.opts.MaxPending {
		h.full.Store(true)
		h.mu.Unlock()
		h.dropped.Add(1)
		return
	}
	h.seq++
	putRowKey(key, r.Time, h.seq)
	h.pending = append(h.pending, buffered{key: key, val: val})
	h.full.Store(len(h.pending) >= h.opts.MaxPending)
	h.mu.Unlock()
	h.recorded.Add(1)
}

// loop flushes every interval until Close; Reconfigure sends it a new one.
func (h *History) loop(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case d := <-h.interval:
			t.Reset(d)
		case <-t.C:
			h.Flush()
		}
	}
}

// buffered returns the events not yet stored. The slices are read after
// the lock is released: their elements are never modified (Record only
// appends, Flush replaces the slices), so a search decoding thousands of
// them never holds up Record.
func (h *History) buffered() [][]buffered {
	h.mu.Lock()
	defer h.mu.Unlock()
	return [][]buffered{h.pending[:len(h.pending):len(h.pending)], h.inflight}
}

// Close stops the flusher, writes what is buffered and closes the store.
func (h *History) Close() error {
	var err error
	h.once.Do(func() {
		close(h.stop)
		h.done.Wait()
		h.Flush()
		h.flushMu.Lock()
		defer h.flushMu.Unlock()
		h.storeMu.Lock()
		defer h.storeMu.Unlock()
		err = h.kv.close()
	})
	return err
}

// Flush writes the buffered events now, in one transaction, then applies
// the budgets. The ticker calls it every interval; tests and Close call it
// directly.
func (h *History) Flush() {
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	h.flushLocked()
}

// flushLocked is Flush with flushMu held.
func (h *History) flushLocked() {
	h.mu.Lock()
	batch, eps := h.pending, h.pendingEps
	h.pending = make([]buffered, 0, min(len(batch), h.opts.MaxPending))
	h.full.Store(false)
	h.pendingEps = nil
	h.inflight, h.inflightEps = batch, eps
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inflight, h.inflightEps = nil, nil
		h.mu.Unlock()
	}()

	now := h.opts.Now()
	err := h.write(batch, eps, now)
	if errors.Is(err, berrors.ErrMaxSizeReached) {
		// The batch did not fit under max_bytes: make room, then try once more.
		h.prune(0.5)
		err = h.write(batch, eps, now)
	}
	if err != nil {
		h.writeErrors.Add(1)
		h.lost.Add(int64(len(batch) + len(eps)))
		h.degrade(fmt.Sprintf("history: writing %d events failed: %v", len(batch), err))
		return
	}
	h.flushes.Add(1)
	h.prune(pruneTo)
	h.recover()
}

// write stores batch and its buckets and deletes what is past max_age, in
// one transaction.
func (h *History) write(batch, eps []buffered, now time.Time) error {
	n, err := h.kv.update(func(tx kvTx) error {
		rows := tx.bucket(bucketRows)
		for i := range batch {
			if err := rows.put(batch[i].key, batch[i].val); err != nil {
				return err
			}
		}
		if err := writeEpisodes(tx, eps); err != nil {
			return err
		}
		if err := foldBuckets(tx, batch, now); err != nil {
			return err
		}
		return h.expire(tx, now)
	})
	h.bytesWritten.Add(n)
	if err == nil {
		h.lastWrite = n
		if !h.expiring.IsZero() {
			h.expiredAt = h.expiring
		}
	}
	h.expiring = time.Time{}
	return err
}

// foldBuckets adds the batch to its minute buckets, and to the hour and
// day buckets already rolled up (a query that arrived before the hour or
// day ended and was recorded after its roll-up), then rolls up the hours
// and days that ended. Hour and day buckets are written once, when their
// time is over, not at every flush: they are the large buckets, and
// rewriting them each minute would be most of the SD card's wear.
//
// A flush shares the processors with the DNS readers, so it does as little
// as it can: the rows are decoded once with their repeated strings
// interned, and a row is counted into an hour or day only when that
// bucket exists (almost never: the current hour and day are not rolled up
// yet).
func foldBuckets(tx kvTx, batch []buffered, now time.Time) error {
	type level struct {
		name     []byte
		size     time.Duration
		cap      int
		onlyKept bool           // fold only into buckets that exist
		b        kvBucket       // the level's store bucket
		aggs     map[int64]*Agg // period start (unix) → what this batch adds to it
		kept     map[int64]bool // onlyKept: whether the period's bucket exists
	}
	levels := []*level{
		{name: bucketMinute, size: time.Minute, cap: minuteCap},
		{name: bucketHour, size: time.Hour, cap: hourCap, onlyKept: true},
		{name: bucketDay, size: day, cap: dayCap, onlyKept: true},
	}
	for _, l := range levels {
		l.b, l.aggs, l.kept = tx.bucket(l.name), map[int64]*Agg{}, map[int64]bool{}
	}
	in := newInterner()
	for _, buf := range batch {
		r, err := decodeRowInterned(buf.key, buf.val, in)
		if err != nil { // encoded by Record: never fails
			continue
		}
		for _, l := range levels {
			t := r.Time.Truncate(l.size).Unix()
			if l.onlyKept {
				ok, seen := l.kept[t]
				if !seen {
					ok = l.b.get(bucketKey(time.Unix(t, 0))) != nil
					l.kept[t] = ok
				}
				if !ok {
					continue
				}
			}
			a := l.aggs[t]
			if a == nil {
				a = newAgg(l.cap)
				l.aggs[t] = a
			}
			a.addInterned(&r, in)
		}
	}
	for _, l := range levels {
		for t, a := range l.aggs {
			k := bucketKey(time.Unix(t, 0))
			if old := l.b.get(k); old != nil {
				prev, err := decodeAgg(old, l.cap, false)
				if err != nil {
					prev = newAgg(l.cap) // a damaged bucket starts over rather than blocking every flush
				}
				prev.merge(a)
				a = prev
			}
			if err := l.b.put(k, a.encode()); err != nil {
				return err
			}
		}
	}
	if err := rollUp(tx, bucketMinute, bucketHour, time.Hour, hourCap, now); err != nil {
		return err
	}
	return rollUp(tx, bucketHour, bucketDay, day, dayCap, now)
}

const day = 24 * time.Hour

// maxRollUps bounds the buckets one flush rolls up per level (after a long
// downtime the rest follow at the next flushes).
const maxRollUps = 48

// rollUp writes the bucket of each ended period (an hour, a day) of level
// to that the finer level from has buckets for and to has none yet, oldest
// first; periods with nothing in them are skipped. It is keyed by period
// and idempotent, so a clock stepped back or forward delays a roll-up at
// most until its period has ended by the clock and never skips one (a
// roll-up that started after the newest bucket skipped every period before
// it once a step back put new queries there). A bucket that exists already
// is complete: foldBuckets adds later rows to it.
func rollUp(tx kvTx, from, to []byte, size time.Duration, cap int, now time.Time) error {
	src, dst := tx.bucket(from), tx.bucket(to)
	current := now.Truncate(size)
	done := 0
	k, _ := src.cursor().First()
	for k != nil && done < maxRollUps {
		p := bucketTime(k).Truncate(size)
		if !p.Before(current) {
			return nil // still running, or after a step back, not begun by the clock
		}
		end := bucketKey(p.Add(size))
		if dst.get(bucketKey(p)) == nil {
			sum := newAgg(cap)
			c := src.cursor()
			for k, v := c.Seek(bucketKey(p)); k != nil && bytes.Compare(k, end) < 0; k, v = c.Next() {
				if a, err := decodeAgg(v, 0, false); err == nil {
					sum.merge(a)
				}
			}
			if err := dst.put(bucketKey(p), sum.encode()); err != nil {
				return err
			}
			done++
		}
		k, _ = src.cursor().Seek(end)
	}
	return nil
}

// expireChunk bounds the deletions of one transaction, so that one flush
// after a long downtime does not build a huge transaction.
const expireChunk = 100_000

// expireEvery is how often a file store deletes by age. Each deletion
// rewrites the first leaf and branch pages of the trees it deletes from
// (copy-on-write), so deleting the minute that just passed max_age at
// every flush wrote those pages once a minute: about a fifth of the
// history's writes to an SD card (docs/performance.md, "SD card wear").
// Once an hour, a row outlives max_days by at most an hour; the store in
// memory has no card to wear and deletes at every flush.
const expireEvery = time.Hour

// expire deletes rows, hour and day buckets older than max_age and minute
// buckets older than minuteRetention (or max_age, if shorter): at every
// flush in memory, at most every expireEvery in a file (a clock stepped
// back, a changed max_age and a chunk left over after a long downtime run
// it at the next flush).
func (h *History) expire(tx kvTx, now time.Time) error {
	if !h.mem && !h.expiredAt.IsZero() && !now.Before(h.expiredAt) && now.Sub(h.expiredAt) < expireEvery {
		return nil
	}
	cut := now.Add(-h.opts.MaxAge)
	n, _, err := tx.bucket(bucketRows).deleteBefore(timeKey(cut), expireChunk)
	h.pruned.Add(int64(n))
	if err != nil {
		return err
	}
	if n < expireChunk { // a full chunk leaves more: the next flush goes on
		h.expiring = now
	}
	if _, _, err := tx.bucket(bucketHour).deleteBefore(bucketKey(cut.Truncate(time.Hour)), expireChunk); err != nil {
		return err
	}
	if _, _, err := tx.bucket(bucketDay).deleteBefore(bucketKey(cut.Truncate(24*time.Hour)), expireChunk); err != nil {
		return err
	}
	if _, _, err := tx.bucket(bucketEpisodes).deleteBefore(timeKey(cut), expireChunk); err != nil {
		return err
	}
	_, _, err = tx.bucket(bucketMinute).deleteBefore(bucketKey(later(cut, now.Add(-minuteRetention))), expireChunk)
	return err
}

// prune deletes the oldest rows while the store's free room is below the
// headroom — the larger of (1-pruneAt) of max_bytes and three times what
// the last flush wrote, so the next intervals and the deletions' own
// copy-on-write pages fit — down to twice the headroom (target overrides
// the goal, for the retry after a full store). Buckets are kept: they are
// small, and the overview of an old day outlives its rows.
func (h *History) prune(target float64) {
	limit := float64(h.opts.MaxBytes - allocStep(h.opts.MaxBytes))
	headroom := max(limit*(1-pruneAt), 3*float64(h.lastWrite))
	goal := max(limit-2*headroom, limit/4)
	if target < pruneTo {
		goal = limit * target
	}
	for range 8 {
		used, _ := h.kv.used()
		if float64(used) <= limit-headroom && target >= pruneTo {
			return
		}
		excess := float64(used) - goal
		if excess <= 0 {
			return
		}
		var deleted int
		n, err := h.kv.update(func(tx kvTx) error {
			rows := tx.bucket(bucketRows)
			// Delete about excess bytes' worth, estimated from the oldest
			// rows' size; the loop corrects the estimate.
			c := rows.cursor()
			var sz float64
			count := 0
			for k, v := c.First(); k != nil && sz < excess && count < expireChunk; k, v = c.Next() {
				sz += h.kv.rowCost(len(k), len(v))
				count++
			}
			if count == 0 {
				return nil
			}
			var err error
			deleted, _, err = rows.deleteBefore(maxKey, count)
			return err
		})
		h.bytesWritten.Add(n)
		h.pruned.Add(int64(deleted))
		if err != nil {
			h.writeErrors.Add(1)
			h.degrade(fmt.Sprintf("history: deleting old rows failed: %v", err))
			return
		}
		if deleted == 0 {
			return
		}
	}
}

// maxKey is above every row key.
var maxKey = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// degrade records why the history is not working, logging only the first
// time (a full disk fails every flush; one line says it).
func (h *History) degrade(why string) {
	if h.problem.Swap(&why) == nil {
		h.log.Error("history degraded; DNS is not affected", zap.String("problem", why))
	}
}

// recover clears a write problem after a successful flush. A store that
// failed to open stays degraded: the history is in memory until restart.
func (h *History) recover() {
	if h.mem && h.opts.Path != "" {
		return
	}
	if p := h.problem.Swap(nil); p != nil {
		h.log.Info("history writes again", zap.String("was", *p))
	}
}

// InMemory reports whether the history lives in memory: no path, or a file
// that could not be opened.
func (h *History) InMemory() bool {
	h.storeMu.RLock()
	defer h.storeMu.RUnlock()
	return h.mem
}

// view runs fn in a read transaction of the current store.
func (h *History) view(fn func(kvTx) error) error {
	h.storeMu.RLock()
	defer h.storeMu.RUnlock()
	return h.kv.view(fn)
}

// Problem is why the history is degraded, or "" when it is not. A file
// moved aside as damaged (precheck) is reported until restart once no
// other problem is.
func (h *History) Problem() string {
	if p := h.problem.Load(); p != nil {
		return *p
	}
	if p := h.moved.Load(); p != nil {
		return *p
	}
	return ""
}

// Stats are the history's counters for /metrics.
type Stats struct {
	Recorded     int64 // events accepted into the buffer
	Dropped      int64 // events dropped because the buffer was full
	Lost         int64 // events of batches whose write failed
	BytesWritten int64 // bytes the store's commits wrote (SD card wear)
	WriteErrors  int64
	Flushes      int64 // successful write transactions
	Pruned       int64 // rows deleted by the age and byte budgets
	Pending      int   // events waiting for the next flush
	UsedBytes    int64 // what the data takes
	FileBytes    int64 // the file's size; 0 in memory
	Degraded     bool
}

// Snapshot reads the counters.
func (h *History) Snapshot() Stats {
	h.mu.Lock()
	pending := len(h.pending) + len(h.inflight)
	h.mu.Unlock()
	h.storeMu.RLock()
	used, size := h.kv.used()
	h.storeMu.RUnlock()
	return Stats{
		Recorded: h.recorded.Load(), Dropped: h.dropped.Load(), Lost: h.lost.Load(),
		BytesWritten: h.bytesWritten.Load(), WriteErrors: h.writeErrors.Load(),
		Flushes: h.flushes.Load(), Pruned: h.pruned.Load(), Pending: pending,
		UsedBytes: used, FileBytes: size, Degraded: h.problem.Load() != nil,
	}
}
