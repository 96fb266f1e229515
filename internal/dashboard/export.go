package dashboard

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/history"
)

// Export formats (docs/history.md, "Export").
const (
	FormatNDJSON = "ndjson"
	FormatCSV    = "csv"
)

// CSVHeader is the export's CSV columns: QueryJSON's fields, tried joined
// with spaces.
var CSVHeader = []string{"time", "client", "client_name", "client_mac", "proto", "name", "type", "class", "source", "upstream", "tried", "cache", "blocked", "list", "rule", "group", "rcode", "ede_code", "ede_text", "duration_ms", "answer", "why"}

// maxExports is how many exports run at once; more get 503. Each holds a
// chunk of rows and a write buffer, and reads the store from start to end.
const maxExports = 2

// exportWriteWindow is how long one chunk of the answer (the 64 KiB write
// buffer) may take to be written: the web server's write timeout bounds a
// whole ordinary request, an export is renewed per chunk so that a long
// one finishes while a client that stops reading is cut off and gives its
// slot back (docs/history.md, "Export"). A variable for the test of that.
var exportWriteWindow = 30 * time.Second

// RowWriter writes exported rows in one format, buffered.
type RowWriter struct {
	w      *bufio.Writer
	enc    *json.Encoder
	csv    *csv.Writer
	record []string
}

// NewRowWriter returns a writer of format (FormatNDJSON or FormatCSV) to w;
// CSV starts with its header line.
func NewRowWriter(w io.Writer, format string) (*RowWriter, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	rw := &RowWriter{w: bw}
	switch format {
	case FormatNDJSON:
		rw.enc = json.NewEncoder(bw)
	case FormatCSV:
		rw.csv = csv.NewWriter(bw)
		rw.record = make([]string, len(CSVHeader))
		if err := rw.csv.Write(CSVHeader); err != nil {
			return nil, err
		}
	default:
		return nil, badParam("format", "want %s or %s", FormatNDJSON, FormatCSV)
	}
	return rw, nil
}

// Write writes one row.
func (rw *RowWriter) Write(r *history.Row) error {
	q := queryJSON(*r)
	if rw.enc != nil {
		return rw.enc.Encode(q)
	}
	var ede string
	if q.EDECode != nil {
		ede = strconv.Itoa(int(*q.EDECode))
	}
	rec := rw.record
	rec = append(rec[:0], q.Time.Format(time.RFC3339Nano), q.Client, q.ClientName, q.ClientMAC, q.Proto,
		q.Name, q.Type, q.Class, q.Source,
		q.Upstream, strings.Join(q.Tried, " "), q.Cache, strconv.FormatBool(q.Blocked),
		q.List, q.Rule, q.Group, q.Rcode,
		ede, q.EDEText, strconv.FormatFloat(q.DurationMS, 'f', 3, 64), q.Answer, q.Why)
	for i, c := range rec {
		rec[i] = inertCell(c)
	}
	return rw.csv.Write(rec)
}

// inertCell keeps a spreadsheet from running a cell as a formula
// (docs/history.md, "Export"): a queried name, a device's own name or an
// answer's text is chosen by whoever controls it, and a cell starting with
// =, +, -, @, a tab or a carriage return is one a spreadsheet may evaluate,
// so such a cell is written with a leading '. No column of numbers,
// times or addresses starts so; NDJSON keeps every value exact.
func inertCell(c string) string {
	if c != "" && strings.IndexByte("=+-@\t\r", c[0]) >= 0 {
		return "'" + c
	}
	return c
}

// Flush writes what is buffered.
func (rw *RowWriter) Flush() error {
	if rw.csv != nil {
		rw.csv.Flush()
		if err := rw.csv.Error(); err != nil {
			return err
		}
	}
	return rw.w.Flush()
}

// apiExport streams the stored rows matching the query search's filters
// and a time range, oldest first, as NDJSON or CSV (docs/history.md,
// "Export"): chunk by chunk from the store, so memory stays constant
// whatever the range, and bounded by the store itself (history.max_days,
// history.max_bytes; the range by the search's 366 days).
func (d *Dashboard) apiExport(w http.ResponseWriter, r *http.Request) {
	v, err := params(r.URL, routeParams["GET /api/queries/export"]...)
	if err != nil {
		writeErr(w, err)
		return
	}
	f, format, err := ExportFilter(v, d.now())
	if err != nil {
		writeErr(w, err)
		return
	}
	select {
	case d.exports <- struct{}{}:
		defer func() { <-d.exports }()
	default:
		w.Header().Set("Retry-After", "10")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"two exports are already running; try again when one ends"}` + "\n"))
		return
	}
	rc := http.NewResponseController(w)
	out := &renewingWriter{w: w, rc: rc}
	rw, err := NewRowWriter(out, format)
	if err != nil {
		writeErr(w, err)
		return
	}
	ctype, ext := "application/x-ndjson", "ndjson"
	if format == FormatCSV {
		ctype, ext = "text/csv; charset=utf-8", "csv"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Disposition", `attachment; filename="nxdns-queries.`+ext+`"`)
	_, err = d.deps.History.Export(r.Context(), f, rw.Write)
	if err == nil {
		err = rw.Flush()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		// The status is sent: end the answer without its last chunk, so the
		// client sees a broken transfer, never a file that looks complete.
		panic(http.ErrAbortHandler)
	}
}

// renewingWriter gives each write of the export a fresh write deadline.
type renewingWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (r *renewingWriter) Write(p []byte) (int, error) {
	r.rc.SetWriteDeadline(time.Now().Add(exportWriteWindow)) // unsupported only on a test recorder
	return r.w.Write(p)
}

// ExportFilter reads the export's parameters (format and the search's
// filters) as GET /api/queries/export does, for `nxdns export`.
func ExportFilter(v url.Values, now time.Time) (history.Filter, string, error) {
	for k, vs := range v {
		if !contains(routeParams["GET /api/queries/export"], k) {
			return history.Filter{}, "", badParam(k, "unknown parameter")
		}
		if len(vs) > 1 {
			return history.Filter{}, "", badParam(k, "given %d times", len(vs))
		}
	}
	format := v.Get("format")
	if format == "" {
		format = FormatNDJSON
	}
	if format != FormatNDJSON && format != FormatCSV {
		return history.Filter{}, "", badParam("format", "want %s or %s", FormatNDJSON, FormatCSV)
	}
	f, err := queryFilter(v, now)
	return f, format, err
}
