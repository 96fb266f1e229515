package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ConfigState is the configuration's life so far, kept by the composition
// root. A reload builds a new pool and new forward zones whose counters
// start at zero; Generation and LoadedAt let a dashboard tell such a reset
// from a restart (process_start_time_seconds moves only on a restart).
type ConfigState struct {
	ReloadsOK     uint64    // reloads applied
	ReloadsFailed uint64    // reloads rejected (bad file) or failed (a listener not bindable); the running configuration stayed
	LastFailed    bool      // the most recent reload failed
	Generation    uint64    // 1 at start, +1 per reload applied
	LoadedAt      time.Time // when the running configuration was applied
}

var (
	configReloads = prometheus.NewDesc("nxdns_config_reloads_total",
		"Configuration reloads (SIGHUP), by outcome: success (applied) or failure (rejected or not applicable; the running configuration stayed).",
		[]string{"outcome"}, nil)
	configLastReloadOK = prometheus.NewDesc("nxdns_config_last_reload_successful",
		"1 unless the most recent reload failed (then the running configuration is older than the file).",
		nil, nil)
	configGeneration = prometheus.NewDesc("nxdns_config_generation",
		"The running configuration's number: 1 at start, +1 per applied reload. Upstream and forward-zone counters restart at zero with each.",
		nil, nil)
	configLoaded = prometheus.NewDesc("nxdns_config_loaded_timestamp_seconds",
		"When the running configuration was applied (start or the last applied reload), Unix time.",
		nil, nil)
)

// configCollector reads the ConfigState at scrape time.
type configCollector struct{ snap func() ConfigState }

func (configCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- configReloads
	ch <- configLastReloadOK
	ch <- configGeneration
	ch <- configLoaded
}

func (c configCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	send(ch, configReloads, prometheus.CounterValue, float64(s.ReloadsOK), "success")
	send(ch, configReloads, prometheus.CounterValue, float64(s.ReloadsFailed), "failure")
	ok := 1.0
	if s.LastFailed {
		ok = 0
	}
	send(ch, configLastReloadOK, prometheus.GaugeValue, ok)
	send(ch, configGeneration, prometheus.GaugeValue, float64(s.Generation))
	send(ch, configLoaded, prometheus.GaugeValue, float64(s.LoadedAt.UnixNano())/1e9)
}
