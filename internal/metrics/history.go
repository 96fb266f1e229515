package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/history"
)

// History series (docs/design.md#history): the wear the store puts on the SD
// card, what it had to drop, and whether it works.
var (
	historyBytesWritten = prometheus.NewDesc("nxdns_history_bytes_written_total",
		"Bytes the history store's write transactions wrote (pages and meta page of the file; values in memory): the SD card's wear.",
		nil, nil)
	historyEvents = prometheus.NewDesc("nxdns_history_events_total",
		"Query events by what became of them: stored (accepted into the buffer), dropped (the buffer between two flushes was full), lost (their batch failed to write).",
		[]string{"outcome"}, nil)
	historyWriteErrors = prometheus.NewDesc("nxdns_history_write_errors_total",
		"Write transactions of the history that failed (a full disk, an I/O error); their events are counted as lost.",
		nil, nil)
	historyPruned = prometheus.NewDesc("nxdns_history_pruned_rows_total",
		"Stored queries deleted by the history's age and byte budgets, oldest first.",
		nil, nil)
	historyStored = prometheus.NewDesc("nxdns_history_store_bytes",
		"Bytes the history's data takes now (within history.max_bytes).",
		nil, nil)
	historyDegraded = prometheus.NewDesc("nxdns_history_degraded",
		"1 while the history is degraded (its file could not be opened or written; see /api/health), else 0. DNS is never affected.",
		nil, nil)
)

// historyCollector reads the history's Snapshot at scrape time.
type historyCollector struct{ snap func() history.Stats }

func (historyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{historyBytesWritten, historyEvents, historyWriteErrors, historyPruned, historyStored, historyDegraded} {
		ch <- d
	}
}

func (c historyCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send(ch, historyBytesWritten, prometheus.CounterValue, float64(s.BytesWritten))
	send(ch, historyEvents, prometheus.CounterValue, float64(s.Recorded), "stored")
	send(ch, historyEvents, prometheus.CounterValue, float64(s.Dropped), "dropped")
	send(ch, historyEvents, prometheus.CounterValue, float64(s.Lost), "lost")
	send(ch, historyWriteErrors, prometheus.CounterValue, float64(s.WriteErrors))
	send(ch, historyPruned, prometheus.CounterValue, float64(s.Pruned))
	send(ch, historyStored, prometheus.GaugeValue, float64(s.UsedBytes))
	degraded := 0.0
	if s.Degraded {
		degraded = 1
	}
	send(ch, historyDegraded, prometheus.GaugeValue, degraded)
}
