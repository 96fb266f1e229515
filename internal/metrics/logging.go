package metrics

import "github.com/prometheus/client_golang/prometheus"

var logDropped = prometheus.NewDesc("nxdns_log_dropped_total",
	"Log lines (query lines included) dropped because stderr did not drain (a busy journald, a full pipe) or failed; queries are never held up by the log.",
	nil, nil)

// logCollector reads the logger's dropped-line count at scrape time.
type logCollector struct{ dropped func() uint64 }

func (logCollector) Describe(ch chan<- *prometheus.Desc) { ch <- logDropped }

func (c logCollector) Collect(ch chan<- prometheus.Metric) {
	send(ch, logDropped, prometheus.CounterValue, float64(c.dropped()))
}
