package history

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// TestMemKV_deleteBeforeCopiesNothing: every flush asks each bucket to
// delete what is past max_age, usually nothing, and the byte budget deletes
// the oldest rows. With a month of rows in memory neither may copy the
// bucket: no allocation, the rows kept all there, exactly the keys below
// the end dropped.
func TestMemKV_deleteBeforeCopiesNothing(t *testing.T) {
	m := newMem()
	key := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	if _, err := m.update(func(tx kvTx) error {
		b := tx.bucket(bucketRows)
		for i := 100; i < 10_100; i++ {
			if err := b.put(key(i), []byte("row")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows := memBucketTx{b: m.buckets[string(bucketRows)], tx: memTx{m: m, written: new(int64)}}
	below := key(50)
	allocs := testing.AllocsPerRun(100, func() {
		if n, size, err := rows.deleteBefore(below, expireChunk); n != 0 || size != 0 || err != nil {
			t.Fatalf("deleted %d keys, %d bytes (%v) below the first key", n, size, err)
		}
	})
	if allocs != 0 {
		t.Errorf("deleting nothing allocated %v times per call", allocs)
	}
	if got := len(rows.b.ents); got != 10_000 {
		t.Fatalf("%d rows left, want 10000", got)
	}
	ends := [][]byte{key(200), key(300)} // AllocsPerRun(1) calls twice
	allocs = testing.AllocsPerRun(1, func() {
		if n, size, _ := rows.deleteBefore(ends[0], expireChunk); n != 100 || size != 100*(8+3) {
			t.Fatalf("deleted %d keys, %d bytes, want 100 and %d", n, size, 100*(8+3))
		}
		ends = ends[1:]
	})
	if allocs != 0 {
		t.Errorf("deleting 100 rows of 10000 allocated %v times", allocs)
	}
	if len(rows.b.ents) != 9_800 || string(entKey(rows.b.ents[0])) != string(key(300)) || rows.b.bytes != 9_800*memCost(8, 3) {
		t.Fatalf("%d rows left (%d bytes) starting at %x, want 9800 from %x", len(rows.b.ents), rows.b.bytes, entKey(rows.b.ents[0]), key(300))
	}
}

// TestMemKV_countsWhatRowsCostOnTheHeap: the memory store counts a row at
// no less than the live heap it takes, so max_bytes (its resident memory,
// at the collector's headroom) bounds what the process holds (issue 30
// item 9: rows were counted at their encoded length, 152 B against 226 B
// of heap). BenchmarkMemResident measures the resident set.
func TestMemKV_countsWhatRowsCostOnTheHeap(t *testing.T) {
	const n = 50_000
	rows := make([][2][]byte, n)
	for i := range rows {
		r := fromEvent(event(t0.Add(time.Duration(i)*time.Millisecond), i))
		rows[i] = [2][]byte{rowKey(r.Time, uint32(i)), appendRow(nil, &r)}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := newMem()
	if _, err := m.update(func(tx kvTx) error {
		b := tx.bucket(bucketRows)
		for _, r := range rows {
			if err := b.put(r[0], r[1]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	used, _ := m.used()
	live := int64(float64(used) / residentFactor)
	t.Logf("%d rows: %.0f B of live heap a row, counted as %.0f", n, float64(heap)/n, float64(live)/n)
	if live < heap {
		t.Errorf("%d rows counted as %d B of live heap (%.0f B a row); they take %d B (%.0f B a row)", n, live, float64(live)/n, heap, float64(heap)/n)
	}
	runtime.KeepAlive(m)
	runtime.KeepAlive(rows) // the input stays live across both readings: only the store's copies are measured
}
