// Package cache is nxdns's answer cache (docs/design.md#cache): the stage of the chain
// between policy and the route that answers repeated questions from memory,
// shares identical queries in flight, refreshes popular names before they
// expire, and serves an expired answer (RFC 8767) when the upstreams or a
// forward zone's router cannot answer in time.
//
// The Cache holds the entries and lives as long as the process: a reload
// (SIGHUP) builds a new Stage over the same Cache, so answers survive it.
// docs/cache.md explains the decisions and the numbers behind them.
package cache

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
)

// Options are the cache's settings, from the dns section of the
// configuration (docs/design.md#cache).
type Options struct {
	Size        int           // entries held; 0 disables the cache
	MaxBytes    int64         // dns.cache_max_bytes: the entries' memory (weight.go); 0 is DefaultMaxBytes
	MinTTL      time.Duration // dns.cache_min_ttl
	MaxTTL      time.Duration // dns.cache_max_ttl
	StaleMaxAge time.Duration // dns.stale_max_age; 0 disables serve-stale
	Prefetch    bool          // dns.prefetch
	File        string        // dns.cache_file; "" keeps the cache in memory only
	Logger      *zap.Logger
	Now         func() time.Time // the clock; nil is time.Now (tests set their own)
}

// DefaultMaxBytes is dns.cache_max_bytes's default: 32 MiB holds the
// default 10 000 entries of ordinary answers (about 2 KiB each at their
// largest) with room, and leaves a 512 MB Raspberry Pi most of its memory
// (docs/cache.md "Memory").
const DefaultMaxBytes = 32 << 20

func (o Options) maxBytes() int64 {
	if o.MaxBytes > 0 {
		return o.MaxBytes
	}
	return DefaultMaxBytes
}

// settings are the options a query reads, swapped whole on reload.
type settings struct {
	lim         limits
	staleMaxAge time.Duration
	prefetch    bool
	file        string
}

func settingsOf(o Options) *settings {
	return &settings{
		lim:         limits{min: seconds(o.MinTTL), max: seconds(o.MaxTTL)},
		staleMaxAge: o.StaleMaxAge,
		prefetch:    o.Prefetch,
		file:        o.File,
	}
}

func seconds(d time.Duration) uint32 { return uint32(min(max(d/time.Second, 0), maxTTLField)) }

// Cache is the answer cache. Safe for concurrent use.
type Cache struct {
	log      *zap.Logger
	now      func() time.Time
	ownClock bool // Options.Now was given (tests): it, not the caller's reading, dates a hit

	mu  sync.Mutex // serialises Reconfigure, saves and Close
	cur atomic.Pointer[current]

	hits, misses, stale, prefetches, coalesced atomic.Uint64
	evictions                                  atomic.Uint64 // of stores replaced by Reconfigure
	oversized                                  atomic.Uint64 // of stores replaced by Reconfigure
	changes                                    atomic.Uint64 // stores and removals, for the periodic save
	// flushes remembers recent Flush calls. An exchange in flight when one
	// reaches its name was asked before it, so its answer is given but not
	// stored (learn).
	flushes flushLog

	zones zoneHealth
	saver saver
}

// current is the store and the settings in force, swapped together.
type current struct {
	st  *store // nil when the cache is disabled
	set *settings
}

// New builds the cache and, when opts.File is set, loads it (a file that
// cannot be used is logged once and ignored).
func New(opts Options) *Cache {
	c := &Cache{log: opts.Logger, now: opts.Now}
	if c.log == nil {
		c.log = zap.NewNop()
	}
	c.log = c.log.Named("cache")
	if c.now == nil {
		c.now = time.Now
	} else {
		c.ownClock = true
	}
	cur := &current{set: settingsOf(opts)}
	if opts.Size > 0 {
		cur.st = newStore(opts.Size, opts.maxBytes())
	}
	c.cur.Store(cur)
	if cur.st != nil && opts.File != "" {
		c.load(cur, opts.File)
	}
	c.saver.start(c)
	return c
}

func (c *Cache) state() (*store, *settings) {
	cur := c.cur.Load()
	return cur.st, cur.set
}

// Reconfigure applies a reloaded configuration. Entries are kept unless the
// change makes them wrong: a new size or byte budget starts an empty store
// of those bounds, and new TTL clamps flush, since every entry's lifetime
// was computed under the old ones. Prefetch, stale_max_age and cache_file
// apply from the next query.
// It reports whether the entries were dropped.
func (c *Cache) Reconfigure(opts Options) (flushed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.cur.Load()
	set := settingsOf(opts)
	next := &current{st: old.st, set: set}
	sizeChanged := old.st == nil != (opts.Size == 0) ||
		old.st != nil && (old.st.limit != opts.Size || old.st.maxBytes != opts.maxBytes())
	if sizeChanged || set.lim != old.set.lim {
		next.st = nil
		if opts.Size > 0 {
			next.st = newStore(opts.Size, opts.maxBytes())
		}
		flushed = old.st != nil && old.st.len() > 0
	}
	c.cur.Store(next)
	if set.file != old.set.file {
		c.saver.saved = c.changes.Load() - 1 // the new file gets the cache at the next save
	}
	if old.st != nil && next.st != old.st {
		c.evictions.Add(old.st.evicted.Load()) // the counters outlive the store
		c.oversized.Add(old.st.oversized.Load())
		old.st.close()
	}
	if flushed {
		c.changes.Add(1)
	}
	return flushed
}

// Close stops the periodic save and writes the cache file one last time.
func (c *Cache) Close() error {
	c.saver.stop()
	err := c.save()
	if st, _ := c.state(); st != nil {
		st.close()
	}
	return err
}

// Flush removes every entry, or with name, the entries for name and every
// name below it. It returns how many it removed.
func (c *Cache) Flush(name string) int {
	st, _ := c.state()
	if st == nil {
		return 0
	}
	name = strings.ToLower(dns.Fqdn(name))
	// Logged before the removal: an answer stored meanwhile is either seen
	// by the removal or sees the flush in learn's check after storing.
	c.flushes.add(name)
	n := st.removeIf(func(k key, _ *entry) bool {
		return under(k.name, name)
	})
	if n > 0 {
		c.changes.Add(1)
	}
	return n
}

// Snapshot is the cache's counters at one instant, for /metrics (docs/design.md#cache).
type Snapshot struct {
	Hits       uint64 // answered from a fresh entry
	Misses     uint64 // passed on to the route, alone or sharing an exchange
	Stale      uint64 // answered from an expired entry with EDE 3
	Prefetches uint64 // background refreshes started near expiry
	Coalesced  uint64 // queries that shared another's exchange in flight
	Evictions  uint64 // entries dropped to make room
	Oversized  uint64 // answers given but not stored: heavier than one entry's share of MaxBytes
	Entries    int    // entries held now
	Bytes      int64  // the entries' weight now (weight.go), at most MaxBytes
}

// Snapshot reads the counters; each is atomic, the set is not one instant.
func (c *Cache) Snapshot() Snapshot {
	st, _ := c.state()
	s := Snapshot{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Stale: c.stale.Load(),
		Prefetches: c.prefetches.Load(), Coalesced: c.coalesced.Load(), Evictions: c.evictions.Load(),
		Oversized: c.oversized.Load(),
	}
	if st != nil {
		s.Entries, s.Bytes = st.len(), st.bytes()
		s.Evictions += st.evicted.Load()
		s.Oversized += st.oversized.Load()
	}
	return s
}
