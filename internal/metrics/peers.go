package metrics

import "github.com/prometheus/client_golang/prometheus"

// PeerState is one [[peers]] peer's pulls (internal/peers).
type PeerState struct {
	URL                      string
	InSync                   bool
	Pulls, Failures, Changes uint64
}

var (
	peerInSync = prometheus.NewDesc("nxdns_peer_in_sync",
		"1 while the peer's dashboard state equalled this node's at the last pull, and that pull was recent.",
		[]string{"peer"}, nil)
	peerPulls = prometheus.NewDesc("nxdns_peer_pulls_total",
		"Pulls of the peer's state: ok, or failed (down, slow, refused, not nxdns).",
		[]string{"peer", "result"}, nil)
	peerChanges = prometheus.NewDesc("nxdns_peer_changes_total",
		"Changes taken from the peer (a later value of a key than this node's).",
		[]string{"peer"}, nil)
)

type peersCollector struct{ snap func() []PeerState }

func (peersCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- peerInSync
	ch <- peerPulls
	ch <- peerChanges
}

func (c peersCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.snap() {
		in := 0.0
		if p.InSync {
			in = 1
		}
		send(ch, peerInSync, prometheus.GaugeValue, in, p.URL)
		send(ch, peerPulls, prometheus.CounterValue, float64(p.Pulls), p.URL, "ok")
		send(ch, peerPulls, prometheus.CounterValue, float64(p.Failures), p.URL, "failed")
		send(ch, peerChanges, prometheus.CounterValue, float64(p.Changes), p.URL)
	}
}
