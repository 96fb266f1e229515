package history

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// exportChunk is how many stored rows one read transaction of an export
// examines (docs/history.md, "Export"). Rows are decoded inside the
// transaction and handed on outside it, so memory is one chunk's rows
// whatever the range, and no transaction lasts longer than a chunk: a
// long read transaction would keep bbolt from reusing the pages the
// flusher frees, and the file would grow towards max_bytes while a slow
// client reads.
const exportChunk = 2048

// Export calls fn for every stored row matching f (its Before and Limit
// are ignored), oldest first, in [f.From, f.To). Rows still in the buffer
// (at most one flush interval) are not included. It stops at the first
// error of fn or when ctx ends, and returns how many rows it handed on.
func (h *History) Export(ctx context.Context, f Filter, fn func(*Row) error) (int, error) {
	return exportRows(ctx, h.view, f, fn)
}

// exportRows is Export over any store's view.
func exportRows(ctx context.Context, view func(func(kvTx) error) error, f Filter, fn func(*Row) error) (int, error) {
	upper := maxKey
	if !f.To.IsZero() {
		upper = timeKey(f.To)
	}
	next := []byte{}
	if !f.From.IsZero() {
		next = timeKey(f.From)
	}
	m := newMatcher(f)
	rows := make([]Row, 0, exportChunk)
	var after []byte // the last key examined: the next chunk starts past it
	total := 0
	for {
		rows = rows[:0]
		done := false
		err := view(func(tx kvTx) error {
			b := tx.bucket(bucketRows)
			if b == nil {
				done = true
				return nil
			}
			c := b.cursor()
			k, v := c.Seek(next)
			if after != nil && k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
			for n := 0; ; n++ {
				if k == nil || bytes.Compare(k, upper) >= 0 {
					done = true
					return nil
				}
				if n == exportChunk {
					return nil
				}
				if m.nameOf(v) {
					if r, err := decodeRow(k, v); err == nil && m.row(&r) { // a damaged row costs itself
						rows = append(rows, r)
					}
				}
				after = append(after[:0], k...)
				k, v = c.Next()
			}
		})
		if err != nil {
			return total, err
		}
		for i := range rows {
			if err := fn(&rows[i]); err != nil {
				return total, err
			}
			total++
		}
		if done {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		next = after
	}
}

// ErrLocked is what OpenReader returns when another process holds the
// file: a running nxdns keeps bbolt's exclusive lock on its history file
// for as long as it runs.
var ErrLocked = errors.New("the history file is locked by a running nxdns")

// Reader is a history file opened read-only, for `nxdns export` on a
// stopped nxdns's store.
type Reader struct {
	kv *boltKV
}

// OpenReader opens path read-only, waiting up to timeout for bbolt's
// shared lock. A running nxdns holds the exclusive lock (a read-write bbolt
// open takes it), so against a running instance this fails with ErrLocked
// after timeout: export through its API instead (GET
// /api/queries/export), which reads in the same chunks.
func OpenReader(path string, timeout time.Duration) (*Reader, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, ReadOnly: true, FreelistType: bolt.FreelistMapType})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Reader{kv: &boltKV{db: db}}, nil
}

// Export is History.Export over the file.
func (r *Reader) Export(ctx context.Context, f Filter, fn func(*Row) error) (int, error) {
	return exportRows(ctx, r.kv.view, f, fn)
}

// Close releases the file.
func (r *Reader) Close() error { return r.kv.close() }
