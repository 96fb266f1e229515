package history

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// BenchmarkRecord is the query path's cost: one Record call per query,
// with the buffer emptied every interval's worth as the flusher does (not
// timed: the flusher runs on its own goroutine).
func BenchmarkRecord(b *testing.B) {
	h := Open(Options{MaxBytes: 1 << 30, MaxAge: time.Hour, Flush: time.Hour})
	defer h.Close()
	e := event(time.Now(), 7)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for i := 0; pb.Next(); i++ {
			h.Record(e)
			if i%10_000 == 0 {
				h.mu.Lock()
				h.pending = make([]buffered, 0, 10_000)
				h.mu.Unlock()
			}
		}
	})
}

// BenchmarkFlush is the write cost of one interval of 1000 events into a
// file: rows, buckets and the fsyncs of one bbolt commit.
func BenchmarkFlush(b *testing.B) {
	dir := b.TempDir()
	h := Open(Options{Path: dir + "/h.db", MaxBytes: 1 << 30, MaxAge: 1000 * time.Hour, Flush: time.Hour})
	defer h.Close()
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range 1000 {
			h.Record(event(at, i))
			at = at.Add(time.Millisecond)
		}
		b.StartTimer()
		h.Flush()
	}
	s := h.Snapshot()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(s.Recorded), "ns/event")
	b.ReportMetric(float64(s.BytesWritten)/float64(s.Recorded), "written-B/event")
	b.ReportMetric(float64(s.UsedBytes)/float64(s.Recorded), "stored-B/event")
}

// month is a busy household's 30 days (busyPerDay queries a day) in a
// history file, built once for the benchmarks below. Set
// NXDNS_HISTORY_MONTH=path to keep and reuse it between runs.
const busyPerDay = 50_000

var (
	monthOnce sync.Once
	monthH    *History
	monthEnd  time.Time
)

func monthHistory(b *testing.B) (*History, time.Time) {
	monthOnce.Do(func() {
		path := os.Getenv("NXDNS_HISTORY_MONTH")
		if path == "" {
			path = os.TempDir() + fmt.Sprintf("/nxdns-month-%d.db", os.Getpid())
			defer func() { os.Remove(path) }() // removed at once: the open file stays readable
		}
		start := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
		monthEnd = start.Add(30 * 24 * time.Hour)
		c := &clock{now: monthEnd}
		_, statErr := os.Stat(path)
		monthH = Open(Options{Path: path, MaxBytes: 4 << 30, MaxAge: 31 * 24 * time.Hour, Flush: time.Hour, Now: c.Now, MaxPending: 1 << 30})
		if statErr == nil {
			return
		}
		rng := rand.New(rand.NewPCG(3, 4))
		names := make([]string, 5000)
		for i := range names {
			names[i] = fmt.Sprintf("host%d.cdn%d.example.com.", i, i%131)
		}
		clients := make([]netip.Addr, 25)
		for i := range clients {
			clients[i] = netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i)})
		}
		n := 30 * busyPerDay
		step := 30 * 24 * time.Hour / time.Duration(n)
		for i := range n {
			at := start.Add(time.Duration(i) * step)
			// Zipf-like: a few names take most queries, as in a household.
			name := names[min(len(names)-1, int(rng.ExpFloat64()*300))]
			e := &query.Event{Time: at, Client: clients[rng.IntN(len(clients))], Name: name, Qtype: dns.TypeA, Qclass: dns.ClassINET,
				Proto: query.UDP, Source: query.SourcePool, Upstream: "tls://9.9.9.9:853", Tried: []string{"tls://9.9.9.9:853"},
				Cache: query.CacheMiss, Rcode: dns.RcodeSuccess, Duration: time.Duration(rng.IntN(60)) * time.Millisecond}
			switch r := rng.IntN(10); {
			case r < 3:
				e.Source, e.Upstream, e.Tried, e.Cache = query.SourceCache, "", nil, query.CacheHit
			case r < 4:
				e.Source, e.Upstream, e.Tried, e.Cache = query.SourceBlocked, "", nil, ""
				e.Filter = query.Decision{Blocked: true, List: "ads", Rule: "||" + name}
			}
			monthH.Record(e)
			if i%(busyPerDay/1440) == 0 { // one flush per simulated minute, as flush_seconds = 60
				monthH.Flush()
			}
		}
		monthH.Flush()
	})
	if monthH == nil {
		b.Fatal("month fixture failed")
	}
	return monthH, monthEnd
}

func BenchmarkOverview(b *testing.B) {
	h, end := monthHistory(b)
	for _, span := range []time.Duration{24 * time.Hour, 30 * 24 * time.Hour} {
		b.Run(fmt.Sprintf("%dd", int(span.Hours()/24)), func(b *testing.B) {
			for b.Loop() {
				o, err := h.Overview(end.Add(-span), end, 10)
				if err != nil || o.Total == 0 {
					b.Fatal(err, o.Total)
				}
			}
		})
	}
	s := h.Snapshot()
	b.Logf("month: %d rows stored, %d bytes used, %.0f bytes/query, file %d bytes", 30*busyPerDay, s.UsedBytes, float64(s.UsedBytes)/float64(30*busyPerDay), s.FileBytes)
}

func BenchmarkSearchMonth(b *testing.B) {
	h, _ := monthHistory(b)
	for _, tc := range []struct {
		name string
		f    Filter
	}{
		{"newest page", Filter{}},
		{"common name", Filter{Name: "host1."}},
		{"client", Filter{Client: "192.168.1.12"}},
		{"blocked", Filter{Source: query.SourceBlocked}},
		{"rare name (a full scan)", Filter{Name: "host4999.cdn"}},
		{"no match (a full scan)", Filter{Name: "nomatch"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := h.Search(context.Background(), tc.f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHouseholdDay writes one day of a busy household (busyPerDay
// queries, one flush a minute as flush_seconds = 60 does) into a file and
// reports the SD card's wear: bytes written per day and per query, as the
// store counts its commits (written-MB/day) and as the kernel counts what
// reached the block device (io-MB/day: write_bytes of /proc/self/io, the
// measure docs/performance.md "SD card wear" uses for the real unit).
// "first" is the first day of a new file; "steady" a day after three
// (max_days = 3), when every flush has rows and minute buckets to expire,
// as a household's history has once it is max_days old.
func BenchmarkHouseholdDay(b *testing.B) {
	for _, tc := range []struct {
		name   string
		before int // days written before the measured one
		maxAge time.Duration
	}{
		{"first", 0, 31 * 24 * time.Hour},
		{"steady", 3, 3 * 24 * time.Hour},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				c := &clock{now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
				h := Open(Options{Path: b.TempDir() + "/h.db", MaxBytes: 1 << 30, MaxAge: tc.maxAge, Flush: time.Hour, Now: c.Now})
				householdMinutes(h, c, tc.before*1440)
				s0, io0 := h.Snapshot(), ioWriteBytes(b)
				householdMinutes(h, c, 1440)
				s := h.Snapshot()
				written, recorded := s.BytesWritten-s0.BytesWritten, s.Recorded-s0.Recorded
				b.ReportMetric(float64(written)/1e6, "written-MB/day")
				b.ReportMetric(float64(written)/float64(recorded), "written-B/query")
				b.ReportMetric(float64(ioWriteBytes(b)-io0)/1e6, "io-MB/day")
				b.ReportMetric(float64(s.UsedBytes)/float64(s.Recorded-s.Pruned), "stored-B/query")
				h.Close()
			}
		})
	}
}

// householdMinutes records busyPerDay's share of each of n minutes and
// flushes after each, as the ticker would.
func householdMinutes(h *History, c *clock, n int) {
	perMinute := busyPerDay / 1440
	for m := range n {
		for i := range perMinute {
			h.Record(event(c.now.Add(time.Duration(i)*time.Second), m*perMinute+i))
		}
		c.now = c.now.Add(time.Minute)
		h.Flush()
	}
}

// ioWriteBytes is write_bytes of /proc/self/io: the bytes this process
// caused to be sent to the block device (its fsyncs included).
func ioWriteBytes(b *testing.B) int64 {
	s, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Skip("no /proc/self/io:", err)
	}
	for line := range strings.SplitSeq(string(s), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Skip("no write_bytes in /proc/self/io")
	return 0
}

// BenchmarkFlushFull is one flush of a full buffer (MaxPending, 50 000
// events by default) into memory: what a busy minute costs the flusher's
// goroutine, which shares the processors with the DNS readers.
func BenchmarkFlushFull(b *testing.B) {
	h := Open(Options{MaxBytes: 1 << 20, MaxAge: time.Hour, Flush: time.Hour})
	defer h.Close()
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		for i := range h.opts.MaxPending {
			h.Record(event(at, i%100))
			at = at.Add(50 * time.Microsecond)
		}
		b.StartTimer()
		h.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*h.opts.MaxPending), "ns/event")
}

// BenchmarkMemResident is what the memory store really costs against
// history.max_bytes (issue 30 item 9: a 128 MiB budget reached 330–372 MB
// of RSS). A memory History with a 64 MiB budget is fed twice what fits,
// flushed every 10 000 rows, so the byte budget prunes; then, after a
// collection, the live heap and the resident set it added are compared
// with the budget and, per row kept, with what the store counts for a row
// (Stats.UsedBytes: the rows' live heap at the collector's headroom).
func BenchmarkMemResident(b *testing.B) {
	const budget = 128 << 20
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		rss0 := residentBytes(b)
		h := Open(Options{MaxBytes: budget, MaxAge: 1000 * time.Hour, Flush: time.Hour})
		at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		i := 0
		for ; h.Snapshot().Pruned < int64(i/2) || i < 100_000; i++ {
			h.Record(event(at, i))
			at = at.Add(100 * time.Millisecond)
			if i%10_000 == 9_999 {
				h.Flush()
			}
		}
		h.Flush()
		s := h.Snapshot()
		runtime.GC()
		runtime.ReadMemStats(&after)
		rss := residentBytes(b) - rss0
		heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
		kept := float64(s.Recorded - s.Pruned)
		b.ReportMetric(float64(rss)/budget, "rss/budget")
		b.ReportMetric(float64(heap)/budget, "heap/budget")
		b.ReportMetric(float64(heap)/kept, "heap-B/row")
		b.ReportMetric(float64(s.UsedBytes)/kept, "counted-B/row")
		b.ReportMetric(kept, "rows-kept")
		h.Close()
	}
}

// residentBytes is the process's resident set (/proc/self/statm).
func residentBytes(b *testing.B) int64 {
	s, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		b.Skip("no /proc/self/statm:", err)
	}
	var size, res int64
	if _, err := fmt.Sscan(string(s), &size, &res); err != nil {
		b.Fatal(err)
	}
	return res * int64(os.Getpagesize())
}
