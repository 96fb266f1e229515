package history

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// boltKV is the store in a bbolt file: a copy-on-write B+tree whose commit
// writes the changed pages, fsyncs, then writes and fsyncs the meta page
// that points at them. A crash at any moment leaves the previous or the new
// transaction, never a mix (bbolt's two meta pages with checksums), so a
// power cut loses at most the interval being written.
type boltKV struct {
	db *bolt.DB
}

// boltAllocSize is how much the file grows at a time once it is past it:
// small, so the byte budget's bound on the file is close to max_bytes.
// bbolt refuses an allocation that would grow the file past MaxSize by this
// step, so the history budgets against max_bytes minus it (allocStep).
const boltAllocSize = 1 << 20

// allocStep is the growth step for a budget: boltAllocSize, or a sixteenth
// of a small budget.
func allocStep(maxBytes int64) int64 { return min(boltAllocSize, maxBytes/16) }

// maxStoreBytes is the largest byte budget this build can keep: bbolt maps
// the whole file and sizes it in int, so a 32-bit build (armv6/v7, 386)
// holds at most 2 GiB - 1 (bbolt's maxMapSize there); configuration allows
// up to 64 GiB, which only 64-bit builds reach.
const maxStoreBytes = math.MaxInt

// fitBudget lowers a budget this build cannot keep to maxStoreBytes, and
// says so: without it, int(max_bytes) wrapped on 32-bit (64 GiB became 0,
// which bbolt reads as "no bound") and prune aimed at a size the file could
// never reach.
func fitBudget(maxBytes int64, log *zap.Logger) int64 {
	if maxBytes <= maxStoreBytes {
		return maxBytes
	}
	log.Warn("history.max_bytes is more than this 32-bit build can map; using its largest",
		zap.Int64("max_bytes", maxBytes), zap.Int64("using", maxStoreBytes))
	return maxStoreBytes
}

// openBolt opens or creates path, bounded by maxBytes (bbolt refuses to grow
// the file past it), and checks the file's integrity: a file that fails the
// check is reported as corrupt and left as it is for the operator.
func openBolt(path string, maxBytes int64) (*boltKV, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("history: %s is not a regular file", path)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        time.Second, // another nxdns holding the file's lock
		MaxSize:        int(maxBytes),
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
	})
	if err != nil {
		return nil, fmt.Errorf("history: open %s: %w", path, err)
	}
	db.AllocSize = int(allocStep(maxBytes))
	k := &boltKV{db: db}
	if err := k.check(); err != nil {
		db.Close()
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	if _, err := k.update(func(kvTx) error { return nil }); err != nil {
		db.Close()
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	return k, nil
}

// check runs bbolt's consistency check (every page reachable once, keys in
// order) and reports its first finding.
func (k *boltKV) check() error {
	return k.db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			return fmt.Errorf("corrupt store: %w", err)
		}
		return nil
	})
}

func (k *boltKV) update(fn func(kvTx) error) (int64, error) {
	tx, err := k.db.Begin(true)
	if err != nil {
		return 0, err
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			tx.Rollback()
			return 0, err
		}
	}
	if err := fn(boltTx{tx}); err != nil {
		tx.Rollback()
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	st := tx.Stats()
	// The new pages of the transaction plus the meta page: what the commit
	// wrote to the file.
	return st.GetPageAlloc() + int64(k.db.Info().PageSize), nil
}

func (k *boltKV) view(fn func(kvTx) error) error {
	return k.db.View(func(tx *bolt.Tx) error { return fn(boltTx{tx}) })
}

func (k *boltKV) used() (used, size int64) {
	st := k.db.Stats()
	k.db.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
	return size - int64(st.FreeAlloc), size
}

// rowCost: a row's key and value scaled to the space they take in a page
// (bbolt's per-element header and the pages' fill).
func (k *boltKV) rowCost(klen, vlen int) float64 { return float64(klen+vlen) * 1.3 }

func (k *boltKV) close() error { return k.db.Close() }

// setMaxBytes changes bbolt's bound on the file's growth. bbolt reads
// MaxSize and AllocSize only while growing the file inside a write
// transaction; the history writes only under its flushMu, which the
// caller holds.
func (k *boltKV) setMaxBytes(n int64) {
	k.db.MaxSize = int(n)
	k.db.AllocSize = int(allocStep(n))
}

type boltTx struct{ tx *bolt.Tx }

func (t boltTx) bucket(name []byte) kvBucket {
	b := t.tx.Bucket(name)
	if b == nil {
		return nil // a read transaction on a file written by an older version
	}
	if bytes.Equal(name, bucketRows) {
		// Rows arrive in key order: full pages instead of half-full ones.
		b.FillPercent = 0.9
	}
	return boltBucket{b}
}

type boltBucket struct{ b *bolt.Bucket }

func (b boltBucket) get(k []byte) []byte   { return b.b.Get(k) }
func (b boltBucket) put(k, v []byte) error { return b.b.Put(k, v) }
func (b boltBucket) cursor() kvCursor      { return b.b.Cursor() }
func (b boltBucket) deleteBefore(end []byte, limit int) (int, int64, error) {
	// Collect first, then delete: deleting under a moving cursor can skip
	// keys in bbolt.
	var keys [][]byte
	size := int64(0)
	c := b.b.Cursor()
	for k, v := c.First(); k != nil && bytes.Compare(k, end) < 0 && len(keys) < limit; k, v = c.Next() {
		size += int64(len(k) + len(v))
		keys = append(keys, bytes.Clone(k))
	}
	for i, k := range keys {
		if err := b.b.Delete(k); err != nil {
			return i, size, err
		}
	}
	return len(keys), size, nil
}
