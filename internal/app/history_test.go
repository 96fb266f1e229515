package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/testutil"
)

// historyHealth reads /api/health's status and history part.
func historyHealth(t *testing.T, webPort uint16) (status, store, problem string) {
	t.Helper()
	var h struct {
		Status  string
		History struct{ Store, Problem string }
	}
	if err := json.Unmarshal([]byte(get(t, fmt.Sprintf("http://127.0.0.1:%d/api/health", webPort), http.StatusOK)), &h); err != nil {
		t.Fatal(err)
	}
	return h.Status, h.History.Store, h.History.Problem
}

// namesInFile opens a history file on its own (after the App let go of
// it) and returns the names it holds, newest first.
func namesInFile(t *testing.T, path string) []string {
	t.Helper()
	h := history.Open(history.Options{Path: path, MaxBytes: 64 << 20, MaxAge: 24 * time.Hour, Flush: time.Hour})
	defer h.Close()
	if p := h.Problem(); p != "" {
		t.Fatalf("%s: %s", path, p)
	}
	p, err := h.Search(context.Background(), history.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range p.Rows {
		names = append(names, r.Name)
	}
	return names
}

// askRecorded sends a query and waits for its event in the history (it is
// recorded after the answer went out).
func askRecorded(t *testing.T, a *App, dnsAddr, name string) {
	t.Helper()
	n := historyRows(t, a)
	ask(t, dnsAddr, name)
	testutil.WaitFor(t, name+" in the history", 5*time.Second, func() bool { return historyRows(t, a) > n })
}

func reload(t *testing.T, a *App, cfg config.Config) {
	t.Helper()
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
}

// TestReload_historyPathMovesTheStore: a reload turns the file on (from
// memory: what was buffered goes to the file), moves it (what was
// buffered stays in the old file, later queries go to the new one) and
// turns it off again, each without a restart and without a warning.
func TestReload_historyPathMovesTheStore(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, webPort := webConfig(t, r)
	cfg.History.FlushSeconds = 3600 // nothing is written but by the reloads
	a := r.start(t, cfg)
	askRecorded(t, a, dnsAddr, "in-memory.example.")
	if _, store, _ := historyHealth(t, webPort); store != "memory" {
		t.Fatalf("store %q at start", store)
	}

	first, second := filepath.Join(r.dir, "first.db"), filepath.Join(r.dir, "second.db")
	cfg.History.Path = first
	reload(t, a, cfg)
	if status, store, problem := historyHealth(t, webPort); status != "ok" || store != "file" || problem != "" {
		t.Fatalf("after turning the file on: %s, %s, %q", status, store, problem)
	}
	askRecorded(t, a, dnsAddr, "first.example.")

	cfg.History.Path = second
	reload(t, a, cfg)
	askRecorded(t, a, dnsAddr, "second.example.")

	cfg.History.Path = ""
	reload(t, a, cfg) // second.example. is flushed into the second file on the way out
	if _, store, _ := historyHealth(t, webPort); store != "memory" {
		t.Fatalf("store %q after turning the file off", store)
	}
	if got := namesInFile(t, first); len(got) != 2 || got[0] != "first.example." || got[1] != "in-memory.example." {
		t.Errorf("first file holds %v, want first.example. and the buffered in-memory.example.", got)
	}
	if got := namesInFile(t, second); len(got) != 1 || got[0] != "second.example." {
		t.Errorf("second file holds %v", got)
	}
	if n := r.observed.FilterMessageSnippet("[history] changed").Len(); n != 0 {
		t.Errorf("%d warnings that [history] waits for a restart", n)
	}
}

// TestReload_unopenableHistoryPathDegradesAndDNSServes: a new path that
// cannot be opened degrades the history as at start (in memory, /api/health
// degraded) while DNS keeps answering; a reload after the fix opens it.
func TestReload_unopenableHistoryPathDegradesAndDNSServes(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, webPort := webConfig(t, r)
	cfg.History.Path = filepath.Join(r.dir, "good.db")
	a := r.start(t, cfg)
	askRecorded(t, a, dnsAddr, "before.example.")

	notADir := r.write(t, "")
	bad := cfg
	bad.History.Path = notADir + "/history.db"
	reload(t, a, bad)
	status, store, problem := historyHealth(t, webPort)
	if status != "degraded" || store != "memory" || problem == "" {
		t.Fatalf("after a bad path: %s, %s, %q", status, store, problem)
	}
	askRecorded(t, a, dnsAddr, "during.example.") // DNS serves, the history goes on in memory
	if got := namesInFile(t, cfg.History.Path); len(got) != 1 || got[0] != "before.example." {
		t.Errorf("the old file holds %v, want what was buffered before the reload", got)
	}

	reload(t, a, cfg)
	if status, store, problem := historyHealth(t, webPort); status != "ok" || store != "file" || problem != "" {
		t.Fatalf("after the fix: %s, %s, %q", status, store, problem)
	}
}

// TestReload_historyFlushIntervalAppliesInPlace: a shorter flush_seconds
// takes effect on the running history: the buffered event is written
// within it, not an hour later.
func TestReload_historyFlushIntervalAppliesInPlace(t *testing.T) {
	r := newRig(t)
	cfg, dnsAddr, _ := webConfig(t, r)
	cfg.History.Path = filepath.Join(r.dir, "h.db")
	cfg.History.FlushSeconds = 3600
	a := r.start(t, cfg)
	askRecorded(t, a, dnsAddr, "buffered.example.")
	flushes := a.history.Snapshot().Flushes

	cfg.History.FlushSeconds = 1
	reload(t, a, cfg)
	askRecorded(t, a, dnsAddr, "next.example.")
	testutil.WaitFor(t, "a flush at the new interval", 5*time.Second, func() bool {
		s := a.history.Snapshot()
		return s.Flushes > flushes && s.Pending == 0
	})
}
