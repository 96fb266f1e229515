package history

import (
	"context"
	"math"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

func TestHistory_roundTripKeepsEveryField(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{{"file", filePath}, {"memory", func(*testing.T) string { return "" }}} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{now: t0}
			path := tc.path(t)
			h := openTest(t, path, c, nil)
			e := event(t0, 7)
			e.Filter = query.Decision{Blocked: true, List: "ads", Rule: "||host7.example^", Group: "kids"}
			e.ClientMAC = "02:00:5e:00:53:07"
			h.Record(e)
			h.Flush()
			if p := h.Problem(); p != "" {
				t.Fatalf("problem: %s", p)
			}
			if path != "" { // survives a restart
				h.Close()
				h = openTest(t, path, c, nil)
			}
			page, err := h.Search(context.Background(), Filter{})
			if err != nil || len(page.Rows) != 1 {
				t.Fatalf("search: %v, %d rows", err, len(page.Rows))
			}
			want := fromEvent(e)
			want.Time = e.Time.Round(0)
			got := page.Rows[0]
			if !got.Time.Equal(want.Time) {
				t.Errorf("time %v, want %v", got.Time, want.Time)
			}
			got.Time = want.Time
			if !reflect.DeepEqual(got, want) {
				t.Errorf("row\n got %+v\nwant %+v", got, want)
			}
			if want.Answer != "A 192.0.2.7" {
				t.Errorf("answer summary %q", want.Answer)
			}
		})
	}
}

func TestHistory_searchFiltersAndPages(t *testing.T) {
	c := &clock{now: t0.Add(time.Hour)}
	h := openTest(t, filePath(t), c, nil)
	for i := range 100 {
		e := event(t0.Add(time.Duration(i)*time.Second), i)
		if i%10 == 0 {
			e.Source, e.Rcode, e.Upstream, e.Tried = query.SourceBlocked, dns.RcodeNameError, "", nil
		}
		h.Record(e)
		if i == 60 {
			h.Flush() // some stored, some buffered: one search sees both
		}
	}
	ctx := context.Background()
	nx := dns.RcodeNameError
	for _, tc := range []struct {
		name string
		f    Filter
		want int
	}{
		{"all", Filter{Limit: MaxLimit}, 100},
		{"name substring, any case", Filter{Name: "HOST1", Limit: MaxLimit}, 11}, // host1, host10..19
		{"client address", Filter{Client: "192.168.1.10", Limit: MaxLimit}, 20},
		{"client name", Filter{Client: "CLIENT1", Limit: MaxLimit}, 20},
		{"source", Filter{Source: query.SourceBlocked, Limit: MaxLimit}, 10},
		{"rcode", Filter{Rcode: &nx, Limit: MaxLimit}, 10},
		{"time range", Filter{From: t0.Add(10 * time.Second), To: t0.Add(20 * time.Second), Limit: MaxLimit}, 10},
		{"nothing", Filter{Name: "nomatch"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := h.Search(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Rows) != tc.want {
				t.Fatalf("%d rows, want %d", len(p.Rows), tc.want)
			}
			for i := 1; i < len(p.Rows); i++ {
				if p.Rows[i].Time.After(p.Rows[i-1].Time) {
					t.Fatalf("row %d is newer than row %d: not newest first", i, i-1)
				}
			}
		})
	}
	// Pages of 30 walk all 100 rows once, newest first.
	var seen []string
	f := Filter{Limit: 30}
	for range 10 {
		p, err := h.Search(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Rows {
			seen = append(seen, r.Name)
		}
		if p.Next == "" {
			break
		}
		f.Before = p.Next
	}
	if len(seen) != 100 || seen[0] != "Host99.Example." || seen[99] != "Host0.Example." {
		t.Fatalf("pages gave %d rows, first %q last %q", len(seen), seen[0], seen[len(seen)-1])
	}
	if _, err := h.Search(ctx, Filter{Before: "zz"}); err != ErrBadCursor {
		t.Errorf("bad cursor: %v", err)
	}
}

// In a file the age budget deletes once an hour, not at every flush: each
// deletion rewrites the first pages of the trees it deletes from, the SD
// card's wear (docs/performance.md, "SD card wear"). A row is gone at most
// an hour after max_days, and a lowered max_days applies at once.
func TestHistory_ageBudgetInAFileDeletesHourly(t *testing.T) {
	c := &clock{now: t0}
	path := filePath(t)
	h := openTest(t, path, c, func(o *Options) { o.MaxAge = 24 * time.Hour })
	rows := func() int {
		t.Helper()
		p, err := h.Search(context.Background(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Rows)
	}
	h.Record(event(t0.Add(-24*time.Hour+30*time.Second), 1)) // past max_days 30 s from now
	h.Record(event(t0, 2))
	h.Flush() // the first flush deletes by age
	if n := rows(); n != 2 {
		t.Fatalf("at the first flush: %d rows, want 2", n)
	}
	c.now = t0.Add(time.Minute)
	h.Flush()
	if n := rows(); n != 2 {
		t.Fatalf("a minute later: %d rows, want 2 (the next deletion is due in an hour)", n)
	}
	c.now = t0.Add(time.Hour)
	h.Flush()
	if n := rows(); n != 1 {
		t.Fatalf("an hour later: %d rows, want 1 (the expired row deleted)", n)
	}
	h.Record(event(t0.Add(-time.Hour), 3))
	h.Flush()
	if n := rows(); n != 2 {
		t.Fatalf("%d rows, want 2", n)
	}
	h.Reconfigure(Options{Path: path, MaxBytes: 64 << 20, MaxAge: 90 * time.Minute, Flush: time.Hour})
	if n := rows(); n != 1 {
		t.Fatalf("after max_days was lowered: %d rows, want 1 (the lower budget applies at once)", n)
	}
}

func TestHistory_ageBudgetDeletesOldRowsAndBuckets(t *testing.T) {
	c := &clock{now: t0}
	h := openTest(t, filePath(t), c, func(o *Options) { o.MaxAge = 24 * time.Hour })
	h.Record(event(t0.Add(-25*time.Hour), 1)) // already past the budget at the next flush
	h.Record(event(t0.Add(-time.Hour), 2))
	h.Flush()
	p, err := h.Search(context.Background(), Filter{})
	if err != nil || len(p.Rows) != 1 || p.Rows[0].Name != "Host2.Example." {
		t.Fatalf("after flush: %v %+v", err, p.Rows)
	}
	c.now = t0.Add(24 * time.Hour)
	h.Flush()
	p, _ = h.Search(context.Background(), Filter{})
	if len(p.Rows) != 0 {
		t.Fatalf("%d rows older than a day survived", len(p.Rows))
	}
	o, err := h.Overview(t0.Add(-30*24*time.Hour), c.now, 10)
	if err != nil || o.Total != 0 {
		t.Fatalf("overview of expired buckets: %v total %d", err, o.Total)
	}
	if s := h.Snapshot(); s.Pruned != 2 {
		t.Errorf("pruned %d, want 2", s.Pruned)
	}
}

func TestHistory_byteBudgetBoundsTheFile(t *testing.T) {
	const budget = 2 << 20
	path := filePath(t)
	c := &clock{now: t0}
	h := openTest(t, path, c, func(o *Options) { o.MaxBytes = budget })
	n := 0
	for range 40 { // about 8 MB of rows in all, four times the budget
		for range 2000 {
			h.Record(event(c.now, n))
			n++
		}
		h.Flush()
		c.now = c.now.Add(time.Minute)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > budget {
			t.Fatalf("file is %d bytes after %d events, budget %d", fi.Size(), n, budget)
		}
	}
	s := h.Snapshot()
	if p := h.Problem(); p != "" || s.WriteErrors != 0 {
		t.Fatalf("problem %q, write errors %d", p, s.WriteErrors)
	}
	if s.Pruned == 0 {
		t.Fatal("nothing pruned: the test did not reach the budget")
	}
	// The newest rows are kept, the oldest gone.
	p, _ := h.Search(context.Background(), Filter{Limit: 1})
	if len(p.Rows) != 1 || p.Rows[0].Name != "Host79999.Example." {
		t.Fatalf("newest row: %+v", p.Rows)
	}
	old, _ := h.Search(context.Background(), Filter{To: t0.Add(time.Minute)})
	if len(old.Rows) != 0 {
		t.Fatalf("%d rows of the first minute survived four budgets' worth", len(old.Rows))
	}
	if s.BytesWritten < int64(n)*50 {
		t.Errorf("bytes written %d for %d events: not counting the writes", s.BytesWritten, n)
	}
}

// TestHistory_budgetFitsThisBuild: the largest max_bytes configuration
// allows (64 GiB) is kept whole on a 64-bit build and lowered to what bbolt
// can map on a 32-bit one, at Open and at Reconfigure, and bbolt's own
// bound is that budget: before, int(64 GiB) wrapped to 0 on 32-bit, which
// bbolt reads as "no bound". (The 32-bit half runs in .ci/arm64.sh, for
// GOARCH=arm under qemu.)
func TestHistory_budgetFitsThisBuild(t *testing.T) {
	const largest = 64 << 30
	want := int64(min(largest, math.MaxInt))
	check := func(when string, h *History) {
		t.Helper()
		if h.opts.MaxBytes != want {
			t.Errorf("%s: budget %d, want %d", when, h.opts.MaxBytes, want)
		}
		if got := h.kv.(*boltKV).db.MaxSize; int64(got) != want {
			t.Errorf("%s: bbolt MaxSize %d, want %d", when, got, want)
		}
		h.Record(event(t0, 1))
		h.Flush()
		if p := h.Problem(); p != "" {
			t.Errorf("%s: problem %q", when, p)
		}
	}
	c := &clock{now: t0}
	h := openTest(t, filePath(t), c, func(o *Options) { o.MaxBytes = largest })
	check("Open", h)
	o := optsOf(h)
	o.MaxBytes = 16 << 20
	h.Reconfigure(o)
	o.MaxBytes = largest
	h.Reconfigure(o)
	check("Reconfigure", h)
}

func TestHistory_recordNeverBlocksAFullBufferDrops(t *testing.T) {
	h := openTest(t, "", &clock{now: t0}, func(o *Options) { o.MaxPending = 10 })
	for i := range 25 {
		h.Record(event(t0, i))
	}
	s := h.Snapshot()
	if s.Recorded != 10 || s.Dropped != 15 || s.Pending != 10 {
		t.Fatalf("recorded %d dropped %d pending %d, want 10 15 10", s.Recorded, s.Dropped, s.Pending)
	}
	h.Flush()
	h.Record(event(t0, 99))
	if s := h.Snapshot(); s.Recorded != 11 {
		t.Fatalf("after a flush the buffer takes events again: recorded %d", s.Recorded)
	}
}

func TestHistory_unusableStoreDegradesToMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		want string
	}{
		{"read-only directory", func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			return dir + "/history.db"
		}, "history.db"},
		{"corrupt file", func(t *testing.T) string {
			p := filePath(t)
			junk := []byte(strings.Repeat("not a bbolt page ", 4096))
			if err := os.WriteFile(p, junk, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "history.db"},
		{"a directory", func(t *testing.T) string { return t.TempDir() }, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			if tc.name == "read-only directory" && os.Geteuid() == 0 {
				// root writes anywhere: make the path's parent a file instead.
				f := filePath(t)
				os.WriteFile(f, nil, 0o600)
				path = f + "/history.db"
			}
			h := openTest(t, path, &clock{now: t0}, nil)
			if p := h.Problem(); !strings.Contains(p, tc.want) || !strings.Contains(p, "memory") {
				t.Fatalf("problem %q, want it to name %q and say memory", p, tc.want)
			}
			h.Record(event(t0, 1))
			h.Flush()
			p, err := h.Search(context.Background(), Filter{})
			if err != nil || len(p.Rows) != 1 {
				t.Fatalf("the in-memory history does not work: %v %d", err, len(p.Rows))
			}
			if !h.Snapshot().Degraded {
				t.Error("snapshot not degraded")
			}
		})
	}
}

// TestHistory_concurrentRecordSearchFlush: Record, Search, Overview and
// Flush from several goroutines at once (run with -race); every recorded
// event ends up stored exactly once.
func TestHistory_concurrentRecordSearchFlush(t *testing.T) {
	h := openTest(t, filePath(t), &clock{now: t0.Add(time.Hour)}, nil)
	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				h.Record(event(t0.Add(time.Duration(w*each+i)*time.Millisecond), i))
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			h.Search(context.Background(), Filter{Name: "host1", Limit: MaxLimit})
			h.Overview(t0, t0.Add(time.Hour), 10)
			h.Flush()
		}
	})
	wg.Wait()
	close(stop)
	readers.Wait()
	h.Flush()
	o, err := h.Overview(t0, t0.Add(time.Hour), 10)
	if err != nil || o.Total != writers*each {
		t.Fatalf("overview total %d (%v), want %d", o.Total, err, writers*each)
	}
	if s := h.Snapshot(); s.Recorded != writers*each || s.Pending != 0 {
		t.Fatalf("recorded %d pending %d", s.Recorded, s.Pending)
	}
}

// TestRow_withoutMACReadsAsBefore: a row stored before the MAC field
// existed (version 1, ending with its answer) still decodes, with no MAC;
// a row with a MAC is found by a search for that MAC.
func TestRow_withoutMACReadsAsBefore(t *testing.T) {
	r := fromEvent(event(t0, 3))
	old := appendRow(nil, &r) // no MAC: exactly the version-1 bytes
	got, err := decodeRow(rowKey(t0, 0), old)
	if err != nil || got.ClientMAC != "" || got.Name != r.Name {
		t.Fatalf("decode of a row without MAC: %+v, %v", got, err)
	}
	r.ClientMAC = "02:00:5e:00:53:03"
	got, err = decodeRow(rowKey(t0, 0), appendRow(nil, &r))
	if err != nil || got.ClientMAC != r.ClientMAC {
		t.Fatalf("decode of a row with MAC: %+v, %v", got, err)
	}
	if !(matcher{f: Filter{Client: "02:00:5E:00:53:03"}}).row(&got) {
		t.Error("a search by the device's MAC does not find its row")
	}
}

// History is a query.EventCopier: an event overwritten once Record has
// returned (the UDP fast path reuses its reader's event for the next hit)
// leaves the recorded row as it was.
func TestHistory_recordKeepsNothingOfTheEvent(t *testing.T) {
	h := openTest(t, "", &clock{now: t0}, nil)
	e := event(t0, 7)
	e.ClientMAC = "02:00:5e:00:53:07"
	want := fromEvent(e)
	h.Record(e)
	*e = *event(t0.Add(time.Second), 8) // the reader's next hit
	h.Flush()
	page, err := h.Search(context.Background(), Filter{})
	if err != nil || len(page.Rows) != 1 {
		t.Fatalf("search: %v, %d rows", err, len(page.Rows))
	}
	got := page.Rows[0]
	want.Time = want.Time.Round(0)
	if !got.Time.Equal(want.Time) {
		t.Errorf("time %v, want %v", got.Time, want.Time)
	}
	got.Time = want.Time
	if !reflect.DeepEqual(got, want) {
		t.Errorf("row\n got %+v\nwant %+v", got, want)
	}
}
