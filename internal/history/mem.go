package history

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
)

// memKV is the store in memory (no history.path): a sorted slice per bucket
// behind one lock. Rows arrive nearly in key order, so an insert is an
// append or a short copy near the end, and the byte budget deletes from the
// front. Lost on restart, bounded by the same budgets as a file; its byte
// budget counts resident memory (used).
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

// used is the resident memory the entries take: their live heap at
// residentFactor.
func (m *memKV) used() (used, size int64) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, b := range m.buckets {
		used += b.bytes
	}
	return int64(float64(used) * residentFactor), 0
}

// rowCost is what a row of klen and vlen bytes adds to used.
func (m *memKV) rowCost(klen, vlen int) float64 {
	return float64(memCost(klen, vlen)) * residentFactor
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
	// ents are sorted by key. Each is one allocation, its key's length (a
	// byte: every key of the layout is 8 or 12), the key, then the value:
	// a key and a value apart cost two allocations and two slice headers.
	ents  [][]byte
	bytes int64 // what the entries cost in memory (memCost)
}

func entKey(e []byte) []byte { return e[1 : 1+int(e[0])] }
func entVal(e []byte) []byte { return e[1+int(e[0]):] }

// memSlot is what an entry costs beyond its bytes: its 24-byte slice
// header in the bucket's array, with the array's growth slack (appends
// fill it up to twice its length; the deleted front stays until the next
// growth) and the allocator's rounding to a size class (about a sixteenth,
// counted apart). Measured by BenchmarkMemResident (docs/history.md).
const memSlot = 48

// memCost is an entry's live heap: its allocation and its share of the
// array.
func memCost(klen, vlen int) int64 {
	n := int64(1 + klen + vlen)
	return n + n/16 + memSlot
}

// residentFactor turns live heap into resident memory: the collector lets
// the heap grow by GOGC percent of what is live before it collects (the
// default 100 doubles it), and the process's pages follow the heap's
// peak. history.max_bytes is resident memory for the memory store
// (docs/history.md), so its rows are counted at this factor.
var residentFactor = func() float64 {
	gc, err := strconv.Atoi(os.Getenv("GOGC"))
	if err != nil || gc <= 0 {
		gc = 100 // the default; "off" has no bound to count against
	}
	return 1 + float64(gc)/100
}()

type memBucketTx struct {
	b  *memBucket
	tx memTx
}

func (b memBucketTx) find(k []byte) (int, bool) {
	return slices.BinarySearchFunc(b.b.ents, k, func(e, k []byte) int { return bytes.Compare(entKey(e), k) })
}

func (b memBucketTx) get(k []byte) []byte {
	if i, ok := b.find(k); ok {
		return entVal(b.b.ents[i])
	}
	return nil
}

func (b memBucketTx) put(k, v []byte) error {
	if b.tx.readOnly {
		panic("history: put in a read transaction")
	}
	if len(k) > 255 {
		return fmt.Errorf("history: a key of %d bytes", len(k)) // none of the layout's
	}
	e := make([]byte, 0, 1+len(k)+len(v))
	e = append(append(append(e, byte(len(k))), k...), v...)
	*b.tx.written += int64(len(k) + len(v))
	i, ok := b.find(k)
	if ok {
		b.b.bytes += memCost(len(k), len(v)) - memCost(len(k), len(entVal(b.b.ents[i])))
		b.b.ents[i] = e
		return nil
	}
	b.b.ents = slices.Insert(b.b.ents, i, e)
	b.b.bytes += memCost(len(k), len(v))
	return nil
}

func (b memBucketTx) deleteBefore(end []byte, limit int) (int, int64, error) {
	n, _ := b.find(end)
	n = min(n, limit)
	if n == 0 {
		return 0, 0, nil // the common case at every flush's expiry
	}
	var size, cost int64
	for _, e := range b.b.ents[:n] {
		k, v := entKey(e), entVal(e)
		size += int64(len(k) + len(v))
		cost += memCost(len(k), len(v))
	}
	// The deleted rows are cleared, so nothing keeps them reachable, and
	// the slice starts after them: a deletion costs what it deletes, not
	// the bucket (a copy of a month's rows was ~100 ms a flush). The start
	// of the array is given back when an append next grows it.
	clear(b.b.ents[:n])
	b.b.ents = b.b.ents[n:]
	b.b.bytes -= cost
	return n, size, nil
}

func (b memBucketTx) cursor() kvCursor { return &memCursor{b: b.b, i: -1} }

type memCursor struct {
	b *memBucket
	i int
}

func (c *memCursor) at() ([]byte, []byte) {
	if c.i < 0 || c.i >= len(c.b.ents) {
		return nil, nil
	}
	e := c.b.ents[c.i]
	return entKey(e), entVal(e)
}

func (c *memCursor) First() ([]byte, []byte) { c.i = 0; return c.at() }
func (c *memCursor) Last() ([]byte, []byte)  { c.i = len(c.b.ents) - 1; return c.at() }
func (c *memCursor) Next() ([]byte, []byte)  { c.i++; return c.at() }
func (c *memCursor) Prev() ([]byte, []byte)  { c.i--; return c.at() }
func (c *memCursor) Seek(k []byte) ([]byte, []byte) {
	c.i, _ = memBucketTx{b: c.b}.find(k)
	return c.at()
}
