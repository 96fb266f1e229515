package history

import (
	"bytes"
	"slices"
	"sync"
)

// memKV is the store in memory (no history.path): sorted slices per bucket
// behind one lock. Rows arrive nearly in key order, so an insert is an
// append or a short copy near the end, and the byte budget deletes from the
// front. Lost on restart, bounded by the same budgets as a file.
type memKV struct {
	mu      sync.RWMutex // guards the fields below; update holds it for writing
	buckets map[string]*memBucket
}

func newMem() *memKV {
	m := &memKV{buckets: map[string]*memBucket{}}
	for _, name := range allBuckets {
		m.buckets[string(name)] = &memBucket{}
	}
	return m
}

// update applies fn's changes as it makes them: without a rollback a failed
// fn keeps what it did before failing. The history's fn fail only on
// encoding bugs, and memory has no half-written state to recover from.
func (m *memKV) update(fn func(kvTx) error) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var written int64
	tx := memTx{m: m, written: &written}
	return written, fn(tx)
}

func (m *memKV) view(fn func(kvTx) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(memTx{m: m, readOnly: true})
}

func (m *memKV) used() (used, size int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, b := range m.buckets {
		used += b.bytes
	}
	return used, 0
}

func (m *memKV) close() error { return nil }

// setMaxBytes: memory has no bound of its own; prune keeps it in budget.
func (m *memKV) setMaxBytes(int64) {}

type memTx struct {
	m        *memKV
	readOnly bool
	written  *int64
}

func (t memTx) bucket(name []byte) kvBucket {
	b := t.m.buckets[string(name)]
	return memBucketTx{b: b, tx: t}
}

type memBucket struct {
	keys, vals [][]byte // sorted by key
	bytes      int64    // len of every key and value
}

type memBucketTx struct {
	b  *memBucket
	tx memTx
}

func (b memBucketTx) find(k []byte) (int, bool) {
	return slices.BinarySearchFunc(b.b.keys, k, bytes.Compare)
}

func (b memBucketTx) get(k []byte) []byte {
	if i, ok := b.find(k); ok {
		return b.b.vals[i]
	}
	return nil
}

func (b memBucketTx) put(k, v []byte) error {
	if b.tx.readOnly {
		panic("history: put in a read transaction")
	}
	k, v = bytes.Clone(k), bytes.Clone(v)
	*b.tx.written += int64(len(k) + len(v))
	i, ok := b.find(k)
	if ok {
		b.b.bytes += int64(len(v) - len(b.b.vals[i]))
		b.b.vals[i] = v
		return nil
	}
	b.b.keys = slices.Insert(b.b.keys, i, k)
	b.b.vals = slices.Insert(b.b.vals, i, v)
	b.b.bytes += int64(len(k) + len(v))
	return nil
}

func (b memBucketTx) deleteBefore(end []byte, limit int) (int, int64, error) {
	n, _ := b.find(end)
	n = min(n, limit)
	if n == 0 {
		return 0, 0, nil // the common case at every flush's expiry
	}
	var size int64
	for i := range n {
		size += int64(len(b.b.keys[i]) + len(b.b.vals[i]))
	}
	// The deleted rows are cleared, so nothing keeps them reachable, and
	// the slices start after them: a deletion costs what it deletes, not
	// the bucket (a copy of a month's rows was ~100 ms a flush). The start
	// of the array is given back when an append next grows it.
	clear(b.b.keys[:n])
	clear(b.b.vals[:n])
	b.b.keys, b.b.vals = b.b.keys[n:], b.b.vals[n:]
	b.b.bytes -= size
	return n, size, nil
}

func (b memBucketTx) cursor() kvCursor { return &memCursor{b: b.b, i: -1} }

type memCursor struct {
	b *memBucket
	i int
}

func (c *memCursor) at() ([]byte, []byte) {
	if c.i < 0 || c.i >= len(c.b.keys) {
		return nil, nil
	}
	return c.b.keys[c.i], c.b.vals[c.i]
}

func (c *memCursor) First() ([]byte, []byte) { c.i = 0; return c.at() }
func (c *memCursor) Last() ([]byte, []byte)  { c.i = len(c.b.keys) - 1; return c.at() }
func (c *memCursor) Next() ([]byte, []byte)  { c.i++; return c.at() }
func (c *memCursor) Prev() ([]byte, []byte)  { c.i--; return c.at() }
func (c *memCursor) Seek(k []byte) ([]byte, []byte) {
	c.i, _ = slices.BinarySearchFunc(c.b.keys, k, bytes.Compare)
	return c.at()
}
