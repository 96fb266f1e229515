package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/filter"
)

// Filter series (docs/design.md#filtering), labelled list: the configured list name (or
// "inline" for filter.block), so the label is bounded by the configuration.
var (
	filterBlocked = prometheus.NewDesc("nxdns_filter_blocked_total",
		"Queries answered as blocked, by the list whose rule blocked them (inline: filter.block); CNAME-cloaked answers included.",
		[]string{"list"}, nil)
	filterRules = prometheus.NewDesc("nxdns_filter_rules",
		"Rules of the list's copy in use (a hosts line naming several names counts each).",
		[]string{"list"}, nil)
	filterAge = prometheus.NewDesc("nxdns_filter_list_age_seconds",
		"Seconds since the list's copy in use was fetched (downloaded or revalidated) or read; absent until it has loaded once.",
		[]string{"list"}, nil)
	filterFailures = prometheus.NewDesc("nxdns_filter_list_refresh_failures_total",
		"Downloads or loads of the list that were rejected (failure, HTML or binary body, over the size cap, shrunk by more than half); the last good copy stayed.",
		[]string{"list"}, nil)
	filterServiceBlocked = prometheus.NewDesc("nxdns_filter_service_blocked_total",
		"Queries answered as blocked by a group's blocked service, by catalogue id; a service appears with its first block.",
		[]string{"service"}, nil)
	filterSafeSearch = prometheus.NewDesc("nxdns_filter_safe_search_total",
		"Queries a group's safe search answered as a CNAME to the engine's safe endpoint, by engine.",
		[]string{"engine"}, nil)
	filterOverCap = prometheus.NewDesc("nxdns_filter_list_names_over_cap",
		"Names of the list's copy in use left out by filter.max_names_per_list or filter.max_names; 0 when it loaded whole.",
		[]string{"list"}, nil)
)

// filterCollector reads the filter engine's Snapshot at scrape time.
type filterCollector struct{ snap func() filter.Snapshot }

func (filterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- filterBlocked
	ch <- filterRules
	ch <- filterAge
	ch <- filterFailures
	ch <- filterOverCap
	ch <- filterServiceBlocked
	ch <- filterSafeSearch
}

func (c filterCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	for _, l := range s.Lists {
		send(ch, filterBlocked, prometheus.CounterValue, float64(l.Blocked), l.Name)
		send(ch, filterRules, prometheus.GaugeValue, float64(l.Rules), l.Name)
		if !l.Loaded.IsZero() {
			send(ch, filterAge, prometheus.GaugeValue, s.Now.Sub(l.Loaded).Seconds(), l.Name)
		}
		send(ch, filterFailures, prometheus.CounterValue, float64(l.Failures), l.Name)
		send(ch, filterOverCap, prometheus.GaugeValue, float64(l.NamesOverCap), l.Name)
	}
	send(ch, filterBlocked, prometheus.CounterValue, float64(s.Inline), filter.InlineList)
	for id, n := range s.Services {
		send(ch, filterServiceBlocked, prometheus.CounterValue, float64(n), id)
	}
	for engine, n := range s.SafeSearch {
		send(ch, filterSafeSearch, prometheus.CounterValue, float64(n), engine)
	}
}
