package dashboard

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/testutil"
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

// A CSV export is opened in a spreadsheet, which runs a cell starting with
// =, +, -, @ (or a tab or carriage return before one) as a formula: a name
// a LAN device asked for, the name it gives itself or an answer's text is
// chosen by whoever controls them. Such a cell is written with a leading '
// (docs/history.md, "Export"); NDJSON keeps every value exact.
func TestExport_csvCellNeverStartsAFormula(t *testing.T) {
	evil := []string{"=1+2.example.", "+cmd.example.", "-x.example.", "@sum.example.", "\t=x.example.", "\r=x.example."}
	var rows []history.Row
	for _, n := range evil {
		rows = append(rows, history.Row{Time: time.Unix(1, 0), Client: netip.MustParseAddr("192.168.1.5"),
			ClientName: `=HYPERLINK("http://127.0.0.1/","x")`, Name: n, Qtype: 1, Qclass: 1, Answer: "@" + n})
	}
	var out bytes.Buffer
	rw, err := NewRowWriter(&out, FormatCSV)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows {
		if err := rw.Write(&rows[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := rw.Flush(); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(recs) != len(evil)+1 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	nameCol := slices.Index(CSVHeader, "name")
	for i, rec := range recs[1:] {
		for j, cell := range rec {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("row %d, %s: %q starts a formula", i, CSVHeader[j], cell)
			}
		}
		if rec[nameCol] != "'"+evil[i] {
			t.Errorf("row %d name %q, want %q", i, rec[nameCol], "'"+evil[i])
		}
	}
	out.Reset()
	if rw, err = NewRowWriter(&out, FormatNDJSON); err != nil {
		t.Fatal(err)
	}
	rw.Write(&rows[0])
	rw.Flush()
	var q QueryJSON
	if err := json.Unmarshal(out.Bytes(), &q); err != nil || q.Name != evil[0] || q.ClientName != rows[0].ClientName {
		t.Errorf("ndjson: %+v, %v: want the values exact", q, err)
	}
}

// The CSV has a column for every field of a query row in NDJSON (a field
// added to QueryJSON, such as client_mac, is not left out of the CSV), and
// a MAC reaches its column.
func TestExport_csvHasEveryFieldOfTheRow(t *testing.T) {
	row := history.Row{Time: time.Unix(1, 0), Client: netip.MustParseAddr("192.168.1.5"), ClientMAC: "02:00:5e:00:53:01", Name: "a.example.", Qtype: 1, Qclass: 1}
	var out bytes.Buffer
	rw, _ := NewRowWriter(&out, FormatNDJSON)
	rw.Write(&row)
	rw.Flush()
	var fields map[string]any
	if err := json.Unmarshal(out.Bytes(), &fields); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		if !slices.Contains(CSVHeader, k) {
			t.Errorf("NDJSON field %s has no CSV column", k)
		}
	}
	out.Reset()
	rw, _ = NewRowWriter(&out, FormatCSV)
	rw.Write(&row)
	rw.Flush()
	recs, err := csv.NewReader(&out).ReadAll()
	if i := slices.Index(CSVHeader, "client_mac"); err != nil || i < 0 || recs[1][i] != row.ClientMAC {
		t.Errorf("client_mac column: %v %v", recs, err)
	}
}

// Clients that take an export and stop reading (a script stuck, a laptop
// closed) hold the two export slots only until one chunk of the answer has
// waited exportWriteWindow to be written (docs/history.md, "Export"):
// meanwhile a third export is 503 with Retry-After, afterwards it runs, well
// before the web server's write timeout would have cut the stalled ones.
func TestExport_clientThatStopsReadingGivesItsSlotBack(t *testing.T) {
	exportWriteWindow = time.Second // before serve: its goroutines start after this
	t.Cleanup(func() { exportWriteWindow = 30 * time.Second })
	base, _ := serve(t, 30_000) // some 10 MB of NDJSON: more than the sockets' buffers hold
	host := strings.TrimPrefix(base, "http://")
	for range maxExports {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /api/queries/export?format=ndjson HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		// The status line arrives with the first chunk: the slot is taken.
		// Then nothing more is read.
		line, err := bufio.NewReaderSize(c, 16).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("a stalled export's status: %q %v", line, err)
		}
	}
	resp, err := http.Get(base + "/api/queries/export?format=csv&source=blocked")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third export while two clients stall: %d, want 503 with Retry-After", resp.StatusCode)
	}
	// Within well under the web server's own write timeout (30 s from the
	// request), which would cut a stalled export without the renewed
	// per-chunk deadline too.
	start := time.Now()
	testutil.WaitFor(t, "an export slot given back by a client that stopped reading", 25*time.Second, func() bool {
		code, _, body := getBody(t, base+"/api/queries/export?format=csv&source=blocked")
		return code == 200 && strings.Count(body, "\n") == 30_000/4+1
	})
	t.Logf("a slot came back %v after the stalled exports began, the window %v", time.Since(start).Round(time.Millisecond), exportWriteWindow)
}
