package cache

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"
)

func TestFlush_nameAndEverythingBelow(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	filled(t, file, "example.", "a.example.", "b.a.example.", "example.org.", "notexample.")
	c, _ := reopen(t, file, time.Hour)
	rec := httptest.NewRecorder()
	c.FlushHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/cache/flush?name=Example", nil))
	var out map[string]int
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out["flushed"] != 3 {
		t.Fatalf("flush answered %s (%v), want 3 flushed", rec.Body, err)
	}
	for name, want := range map[string]int{"example.org.": 1, "notexample.": 1, "a.example.": 0} {
		if got := len(c.Explain(name, 0)); got != want {
			t.Errorf("%s: %d entries after flushing example, want %d", name, got, want)
		}
	}
	rec = httptest.NewRecorder()
	c.FlushHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/cache/flush", nil))
	if c.Snapshot().Entries != 0 {
		t.Errorf("flush without a name left %d entries", c.Snapshot().Entries)
	}
}

func TestEntryHandler(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cache")
	filled(t, file, "a.example.")
	c, _ := reopen(t, file, time.Hour)
	for _, tc := range []struct {
		url  string
		code int
		n    int
	}{
		{"/api/cache/entry?name=A.example&type=a", 200, 1},
		{"/api/cache/entry?name=a.example", 200, 1},
		{"/api/cache/entry?name=a.example&type=AAAA", 200, 0},
		{"/api/cache/entry?name=a.example&type=BOGUS", 400, 0},
		{"/api/cache/entry", 400, 0},
	} {
		rec := httptest.NewRecorder()
		c.EntryHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.url, nil))
		if rec.Code != tc.code {
			t.Errorf("%s: status %d, want %d", tc.url, rec.Code, tc.code)
			continue
		}
		if tc.code != 200 {
			continue
		}
		var out struct{ Entries []Explanation }
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Entries) != tc.n {
			t.Errorf("%s: %s, want %d entries", tc.url, rec.Body, tc.n)
		}
		if tc.n == 1 && (out.Entries[0].State != "fresh" || out.Entries[0].Via != "pool" || out.Entries[0].Answer != "A 192.0.2.1") {
			t.Errorf("%s: %+v", tc.url, out.Entries[0])
		}
	}
}
