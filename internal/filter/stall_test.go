package filter

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
)

// TestRebuild_neverStallsQueriesOrScrapes: while a big list is rebuilt, the
// query path answers from the serving set and Snapshot (metrics, health)
// returns; each takes a small fraction of the rebuild's time.
func TestRebuild_neverStallsQueriesOrScrapes(t *testing.T) {
	path := synthetic(t, t.TempDir(), 200_000)
	cfg := config.Config{Filter: config.FilterDefaults()}
	cfg.Filter.Lists = []config.FilterList{{Name: "big", Path: path}}
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)

	next := cfg.Filter
	next.Block = []string{"refresh.example"}
	var done atomic.Bool
	rebuilt := make(chan time.Duration)
	go func() {
		start := time.Now()
		e.Update(next)
		done.Store(true)
		rebuilt <- time.Since(start)
	}()
	var worstQuery, worstSnap time.Duration
	queries := 0
	for !done.Load() {
		start := time.Now()
		_, ev := ask(t, s, &nextHandler, "192.168.1.5", "ads3.tracker-network.example.", dns.TypeA)
		worstQuery = max(worstQuery, time.Since(start))
		if !ev.Filter.Blocked {
			t.Fatal("a listed name passed during the rebuild")
		}
		start = time.Now()
		e.Snapshot()
		worstSnap = max(worstSnap, time.Since(start))
		queries++
	}
	took := <-rebuilt
	t.Logf("rebuild %v; %d queries during it, slowest %v; slowest snapshot %v", took, queries, worstQuery, worstSnap)
	if worstQuery > took/4 || worstSnap > took/4 {
		t.Errorf("a query (%v) or a snapshot (%v) waited for a good part of the %v rebuild", worstQuery, worstSnap, took)
	}
	if !blocks(e, "refresh.example") {
		t.Error("the rebuilt set is not serving")
	}
}

var nextHandler next
