package history

import (
	"context"
	"testing"
	"time"
)

// Export reads across its chunks (more rows than one read transaction
// takes) every row of [From, To) once, oldest first, in the file and in
// memory alike; a filter is the search's; a flush between chunks (a
// running nxdns) neither repeats nor skips a row that was stored before
// the export began.
func TestExport_everyRowOnceOldestFirstAcrossChunks(t *testing.T) {
	for _, path := range []string{"", filePath(t)} {
		c := &clock{now: t0}
		h := openTest(t, path, c, func(o *Options) { o.MaxPending = 10_000 })
		const n = 3*exportChunk + 17
		for i := range n {
			h.Record(event(t0.Add(-time.Hour+time.Duration(i)*time.Millisecond), i))
		}
		h.Flush()
		var got []time.Time
		flushed := false
		count, err := h.Export(context.Background(), Filter{}, func(r *Row) error {
			got = append(got, r.Time)
			if len(got) == exportChunk+1 && !flushed { // rows arriving meanwhile
				h.Record(event(t0.Add(time.Minute), 1))
				h.Flush()
				flushed = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if count != n+1 || len(got) != n+1 {
			t.Fatalf("path %q: %d rows (counted %d), want %d and the one flushed meanwhile", path, len(got), count, n+1)
		}
		for i := 1; i < len(got); i++ {
			if !got[i].After(got[i-1]) {
				t.Fatalf("path %q: row %d at %v not after %v", path, i, got[i], got[i-1])
			}
		}
		from, to := t0.Add(-time.Hour+100*time.Millisecond), t0.Add(-time.Hour+200*time.Millisecond)
		count, err = h.Export(context.Background(), Filter{From: from, To: to, Client: "client0"}, func(r *Row) error {
			if r.Time.Before(from) || !r.Time.Before(to) || r.ClientName != "client0" {
				t.Errorf("row %v %s outside the filter", r.Time, r.ClientName)
			}
			return nil
		})
		if err != nil || count != 20 {
			t.Errorf("path %q: filtered export: %d rows, %v; want 20", path, count, err)
		}
	}
}
