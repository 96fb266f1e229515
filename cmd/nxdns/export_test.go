package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/query"
)

// writeStore fills a history file with n rows straight through the
// history's own writer (Record and Flush in batches), which is much faster
// than n DNS queries and writes the same stored form. The rows are spread
// over the last n*10 ms; every tenth is blocked.
func writeStore(t testing.TB, path string, n int) time.Time {
	t.Helper()
	const batch = 100_000
	h := history.Open(history.Options{Path: path, MaxBytes: 2 << 30, MaxAge: 30 * 24 * time.Hour, Flush: time.Hour, MaxPending: batch + 1})
	start := time.Now().Add(-time.Duration(n) * 10 * time.Millisecond).Truncate(time.Second)
	e := query.Event{Client: netip.MustParseAddr("192.168.1.20"), ClientName: "laptop", Proto: query.UDP,
		Qtype: 1, Qclass: 1, Source: query.SourcePool, Upstream: "dot.example", Cache: query.CacheMiss,
		Resolved: true, Answer: "A 192.0.2.1", Duration: 12 * time.Millisecond}
	for i := range n {
		e.Time = start.Add(time.Duration(i) * 10 * time.Millisecond)
		e.Name = "host" + strconv.Itoa(i%5000) + ".example.org"
		e.Source, e.Filter = query.SourcePool, query.Decision{}
		if i%10 == 0 {
			e.Source, e.Filter = query.SourceBlocked, query.Decision{Blocked: true, List: "ads", Rule: "example.org"}
		}
		h.Record(&e)
		if (i+1)%batch == 0 {
			h.Flush()
		}
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if p := h.Problem(); p != "" {
		t.Fatalf("history degraded while writing: %s", p)
	}
	return start
}

// peakAnon polls /proc/PID/status for RssAnon (the process's own memory:
// heap, stacks; not the pages of the memory-mapped store, which are the
// file's page cache) and VmHWM until done closes.
func peakAnon(pid int, done <-chan struct{}) (anonKB, hwmKB int) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				if len(f) < 2 {
					continue
				}
				v, _ := strconv.Atoi(f[1])
				switch f[0] {
				case "RssAnon:":
					anonKB = max(anonKB, v)
				case "VmHWM:":
					hwmKB = max(hwmKB, v)
				}
			}
		}
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// countingWriter counts lines and keeps the first few.
type countingWriter struct {
	lines int
	head  bytes.Buffer
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.lines += bytes.Count(p, []byte{'\n'})
	if c.head.Len() < 4096 {
		c.head.Write(p[:min(len(p), 4096)])
	}
	return len(p), nil
}

// `nxdns export` streams 1.5 million rows from a stopped nxdns's history
// file in bounded memory: its own memory (RssAnon, polled) stays under
// 64 MiB where holding the rows would take hundreds; every row arrives,
// oldest first, in NDJSON and CSV; a filter narrows them. The rows per
// second go to the log (docs/history.md, "Export").
func TestExport_streamsOnePointFiveMillionRowsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a store of 1.5 million rows")
	}
	const n = 1_500_000
	path := filepath.Join(t.TempDir(), "history.db")
	t0 := time.Now()
	start := writeStore(t, path, n)
	fi, _ := os.Stat(path)
	t.Logf("store of %d rows written in %v: %d MB", n, time.Since(t0).Round(time.Millisecond), fi.Size()>>20)

	run := func(args ...string) (*countingWriter, int, int, time.Duration) {
		t.Helper()
		cmd := exec.Command(binary, append([]string{"export", "--history", path}, args...)...)
		out := &countingWriter{}
		cmd.Stdout = out
		var stderr strings.Builder
		cmd.Stderr = &stderr
		began := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var anon, hwm int
		var wg sync.WaitGroup
		wg.Go(func() { anon, hwm = peakAnon(cmd.Process.Pid, done) })
		err := cmd.Wait()
		took := time.Since(began)
		close(done)
		wg.Wait()
		if err != nil {
			t.Fatalf("nxdns export %v: %v\n%s", args, err, stderr.String())
		}
		return out, anon, hwm, took
	}

	out, anon, hwm, took := run("--format", "ndjson")
	t.Logf("ndjson: %d rows in %v (%.0f rows/s); peak RssAnon %d MiB, VmHWM %d MiB (with the mapped store)",
		out.lines, took.Round(time.Millisecond), float64(out.lines)/took.Seconds(), anon>>10, hwm>>10)
	if out.lines != n {
		t.Errorf("ndjson: %d rows, want %d", out.lines, n)
	}
	if anon == 0 || anon > 64<<10 {
		t.Errorf("peak RssAnon %d KiB: want a bound of 64 MiB whatever the rows", anon)
	}
	first, _ := bufio.NewReader(bytes.NewReader(out.head.Bytes())).ReadBytes('\n')
	var row struct {
		Time    time.Time `json:"time"`
		Blocked bool      `json:"blocked"`
		Name    string    `json:"name"`
	}
	if err := json.Unmarshal(first, &row); err != nil || !row.Time.Equal(start) || !row.Blocked || row.Name != "host0.example.org" {
		t.Errorf("first row %s (%v): want the oldest, blocked, host0.example.org at %v", first, err, start)
	}

	out, anon, _, took = run("--format", "csv", "--source", "blocked")
	t.Logf("csv, blocked only: %d lines in %v; peak RssAnon %d MiB", out.lines, took.Round(time.Millisecond), anon>>10)
	if out.lines != n/10+1 {
		t.Errorf("csv --source blocked: %d lines, want %d rows and the header", out.lines, n/10)
	}
	if !strings.HasPrefix(out.head.String(), "time,client,client_name,") {
		t.Errorf("csv starts %.60q, want the header", out.head.String())
	}

	// The same store served by a running nxdns: GET /api/queries/export
	// streams every row while the server's own memory stays bounded.
	cfg, port := loopbackConfigWith(t, "", "")
	cfg += fmt.Sprintf("[history]\npath = %q\nmax_bytes = 1073741824\n", path)
	cfgPath := filepath.Join(t.TempDir(), "nxdns.toml")
	writeConfig(t, cfgPath, cfg)
	srv, stderr := startRun(t, "--config", cfgPath)
	awaitLine(t, lineChan(stderr), "web server listening")
	done := make(chan struct{})
	var anonSrv, hwmSrv int
	var wg sync.WaitGroup
	wg.Go(func() { anonSrv, hwmSrv = peakAnon(srv.Process.Pid, done) })
	began := time.Now()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/queries/export?format=ndjson", port))
	if err != nil {
		t.Fatal(err)
	}
	api := &countingWriter{}
	_, err = io.Copy(api, resp.Body)
	resp.Body.Close()
	took = time.Since(began)
	close(done)
	wg.Wait()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/queries/export: %d, %v", resp.StatusCode, err)
	}
	t.Logf("API ndjson: %d rows in %v (%.0f rows/s); the server's peak RssAnon %d MiB, VmHWM %d MiB",
		api.lines, took.Round(time.Millisecond), float64(api.lines)/took.Seconds(), anonSrv>>10, hwmSrv>>10)
	if api.lines != n {
		t.Errorf("API: %d rows, want %d", api.lines, n)
	}
	if anonSrv == 0 || anonSrv > 96<<10 {
		t.Errorf("the server's peak RssAnon %d KiB: want a bound of 96 MiB whatever the rows", anonSrv)
	}
}

// A running nxdns holds its history file's lock: `nxdns export` on it
// says so at once (after --timeout) and points at --url, instead of
// hanging or reading a file being written; a range of ten years is
// refused naming the parameter.
func TestExport_lockedFileAndTenYearRangeAreClearErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	writeStore(t, path, 10)
	h := history.Open(history.Options{Path: path, MaxBytes: 64 << 20, MaxAge: time.Hour, Flush: time.Hour})
	defer h.Close()
	out, code := nxdns(t, "export", "--history", path, "--timeout", "200ms")
	if code != exitProblems || !strings.Contains(out, "locked by a running nxdns") || !strings.Contains(out, "--url") {
		t.Errorf("export of a held file: exit %d, %q", code, out)
	}
	out, code = nxdns(t, "export", "--history", path, "--from", "2016-01-01T00:00:00Z", "--to", "2026-01-01T00:00:00Z")
	if code != exitUsage || !strings.Contains(out, "from: the range is longer than 366 days") {
		t.Errorf("ten years: exit %d, %q", code, out)
	}
}
