package cachecompare

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/maypok86/otter/v2"
)

// candidate is the operations the cache needs of its bounded map.
type candidate interface {
	Get(key) (*entry, bool)
	Set(key, *entry)
}

type clockC struct{ s *store }

func (c clockC) Get(k key) (*entry, bool) { e := c.s.get(k); return e, e != nil }
func (c clockC) Set(k key, e *entry)      { c.s.put(k, e) }

type otterC struct{ c *otter.Cache[key, *entry] }

func (c otterC) Get(k key) (*entry, bool) { return c.c.GetIfPresent(k) }
func (c otterC) Set(k key, e *entry)      { c.c.Set(k, e) }

type lruC struct{ c *lru.Cache[key, *entry] }

func (c lruC) Get(k key) (*entry, bool) { return c.c.Get(k) }
func (c lruC) Set(k key, e *entry)      { c.c.Add(k, e) }

type twoQC struct {
	c *lru.TwoQueueCache[key, *entry]
}

func (c twoQC) Get(k key) (*entry, bool) { return c.c.Get(k) }
func (c twoQC) Set(k key, e *entry)      { c.c.Add(k, e) }

var candidates = []struct {
	name string
	make func(size int) candidate
}{
	{"clock", func(n int) candidate { return clockC{newStore(n)} }},
	{"otter", func(n int) candidate {
		return otterC{otter.Must(&otter.Options[key, *entry]{MaximumSize: n})}
	}},
	{"lru", func(n int) candidate { c, _ := lru.New[key, *entry](n); return lruC{c} }},
	{"2q", func(n int) candidate { c, _ := lru.New2Q[key, *entry](n); return twoQC{c} }},
}

func keys(n int) []key {
	ks := make([]key, n)
	for i := range ks {
		ks[i] = key{name: fmt.Sprintf("host%d.example.com.", i), qtype: 1, qclass: 1}
	}
	return ks
}

// BenchmarkHit: parallel reads of entries that are present, 10 000 of them.
func BenchmarkHit(b *testing.B) {
	ks := keys(10000)
	e := &entry{}
	for _, c := range candidates {
		b.Run(c.name, func(b *testing.B) {
			cc := c.make(len(ks) * 2)
			for _, k := range ks {
				cc.Set(k, e)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := rand.IntN(len(ks))
				for pb.Next() {
					if _, ok := cc.Get(ks[i]); !ok {
						b.Fatal("miss")
					}
					i = (i + 7919) % len(ks)
				}
			})
		})
	}
}

// BenchmarkInsertAtBound: new keys into a full cache (every insert evicts).
func BenchmarkInsertAtBound(b *testing.B) {
	ks := keys(200000)
	e := &entry{}
	for _, c := range candidates {
		b.Run(c.name, func(b *testing.B) {
			cc := c.make(10000)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				cc.Set(ks[i%len(ks)], e)
			}
		})
	}
}

// BenchmarkMemoryPerEntry: heap held by the cache structure per entry,
// beyond the keys' strings and the entries themselves (shared here),
// reported as B/entry. Each iteration fills a new cache of n; run it with
// -benchtime=1x (cache-compare.sh does).
func BenchmarkMemoryPerEntry(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		ks := keys(n)
		e := &entry{}
		for _, c := range candidates {
			b.Run(fmt.Sprintf("%s/%d", c.name, n), func(b *testing.B) {
				var held uint64
				for b.Loop() {
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					cc := c.make(n)
					for _, k := range ks {
						cc.Set(k, e)
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					held += after.HeapAlloc - before.HeapAlloc
					runtime.KeepAlive(cc)
				}
				b.ReportMetric(float64(held)/float64(b.N)/float64(n), "B/entry")
			})
		}
	}
}

// chosen is the candidate internal/cache uses (docs/cache.md).
const chosen = "otter"

// TestHotNamesUnderFlood: 100 hot names asked every round among a flood of
// names asked once, in a cache of 1000. The chosen store keeps every hot
// name after warm-up (at most 1 % misses, a margin for its sketch), which is
// why it was chosen; plain LRU, which protects a name only if it comes back
// within one bound's worth of inserts, loses nearly all of them, which shows
// the workload is a flood at all.
func TestHotNamesUnderFlood(t *testing.T) {
	hot, flood := keys(100), keys(1000000)[100:]
	e := &entry{}
	rates := map[string]float64{}
	for _, c := range candidates {
		cc := c.make(1000)
		misses, asks := 0, 0
		f := 0
		for round := range 200 {
			for _, k := range hot {
				if _, ok := cc.Get(k); !ok {
					if round > 10 {
						misses++
					}
					cc.Set(k, e)
				}
				if round > 10 {
					asks++
				}
				for range 20 { // twenty one-time names per hot lookup: 2000 between two asks of a hot name, twice the bound
					cc.Set(flood[f%len(flood)], e)
					f++
				}
			}
		}
		rates[c.name] = 100 * float64(misses) / float64(asks)
		t.Logf("%-6s hot-name miss rate under a flood: %.1f%%", c.name, rates[c.name])
	}
	if r := rates[chosen]; r > 1 {
		t.Errorf("%s missed %.1f%% of hot-name lookups under the flood, want at most 1%%: it does not keep hot names", chosen, r)
	}
	if r := rates["lru"]; r < 90 {
		t.Errorf("plain LRU missed only %.1f%% of hot-name lookups, want at least 90%%: the workload is no flood", r)
	}
}

var _ sync.Locker // store.go's imports
