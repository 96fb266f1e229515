package dashboard

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func getBody(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// GET /api/queries/export streams every stored row matching the search's
// filters, oldest first, as NDJSON (the fields of /api/queries) or CSV
// (a header and the same fields); a bad format, an unknown parameter and a
// range of ten years are 400s naming the parameter.
func TestExport_ndjsonAndCSVWithTheSearchFilters(t *testing.T) {
	base, _ := serve(t, 20)
	code, hdr, body := getBody(t, base+"/api/queries/export?format=ndjson&source=blocked")
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if code != 200 || hdr.Get("Content-Type") != "application/x-ndjson" || len(lines) != 5 {
		t.Fatalf("ndjson, blocked: %d %s, %d lines:\n%s", code, hdr.Get("Content-Type"), len(lines), body)
	}
	var prev QueryJSON
	for i, l := range lines {
		var q QueryJSON
		if err := json.Unmarshal([]byte(l), &q); err != nil || !q.Blocked || q.Source != "blocked" {
			t.Fatalf("line %d %q: %v", i, l, err)
		}
		if i > 0 && !q.Time.After(prev.Time) {
			t.Errorf("line %d at %v, not after %v: want oldest first", i, q.Time, prev.Time)
		}
		prev = q
	}
	code, hdr, body = getBody(t, base+"/api/queries/export?format=csv")
	lines = strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/csv") || len(lines) != 21 || lines[0] != strings.Join(CSVHeader, ",") {
		t.Fatalf("csv: %d %s, %d lines:\n%.300s", code, hdr.Get("Content-Type"), len(lines), body)
	}
	for q, want := range map[string]string{
		"format=xml": "format:",
		"limit=5":    "limit: unknown parameter",
		"from=2016-01-01T00:00:00Z&to=2026-01-01T00:00:00Z": "the range is longer than 366 days",
	} {
		if code, _, body := getBody(t, base+"/api/queries/export?"+q); code != 400 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 400 with %q", q, code, body, want)
		}
	}
}
