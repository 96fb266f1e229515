package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/server"
)

// Device series (docs/devices.md). Labels stay bounded: a device is a label
// value only when a [[clients]] entry names it; every other device's
// queries are summed under device="other".
var (
	devicesKnown = prometheus.NewDesc("nxdns_devices",
		"Devices remembered now (by MAC or ClientID; at most 4096).", nil, nil)
	devicesNew = prometheus.NewDesc("nxdns_devices_new",
		"Devices seen for the first time and not yet acknowledged on the dashboard, now.", nil, nil)
	devicesFirstSeen = prometheus.NewDesc("nxdns_devices_first_seen_total",
		"Devices seen for the first time (each logged once, \"new device\").", nil, nil)
	devicesEvicted = prometheus.NewDesc("nxdns_devices_evicted_total",
		"Devices forgotten to stay within the bound, those seen longest ago first.", nil, nil)
	devicesNameCollisions = prometheus.NewDesc("nxdns_device_name_collisions_total",
		"ClientIDs, lease or PTR names not used as a device's name because a [[clients]] entry or a filter group has that name.", nil, nil)
	deviceQueries = prometheus.NewDesc("nxdns_device_queries_total",
		"Queries by device: the [[clients]] name of a device named by mac or client_id, or \"other\" for every other device.",
		[]string{"device"}, nil)
	neighbourEntries = prometheus.NewDesc("nxdns_neighbours",
		"Addresses with a MAC in the neighbour table nxdns follows (IPv4 ARP and IPv6 NDP), now.", nil, nil)
	neighbourEvents = prometheus.NewDesc("nxdns_neighbour_events_total",
		"Neighbour table events, by kind: flap (an address changed MAC), dropped (a new address not stored, the table full), rescan (a full re-read), failure (a read that failed).",
		[]string{"kind"}, nil)
	clientOptionsIgnored = prometheus.NewDesc("nxdns_client_options_ignored_total",
		"Client-identity claims not believed, by option and reason: mac/untrusted and subnet/untrusted (EDNS0 option 65001 or client subnet from a source outside dns.trusted_forwarders), mac/malformed (not one unicast MAC), subnet/partial (a network, not one address), client_id/invalid (a DoH path or DoT SNI label that is no valid ClientID: refused).",
		[]string{"option", "reason"}, nil)
)

// devicesCollector reads the device registry and the server's counts of
// ignored client options.
type devicesCollector struct {
	devs   func() devices.Stats
	neigh  func() (devices.NeighbourStats, bool)
	server func() server.Snapshot
}

func (c devicesCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{devicesKnown, devicesNew, devicesFirstSeen, devicesEvicted,
		devicesNameCollisions, deviceQueries, neighbourEntries, neighbourEvents, clientOptionsIgnored} {
		ch <- d
	}
}

func (c devicesCollector) Collect(ch chan<- prometheus.Metric) {
	if c.devs != nil {
		s := c.devs()
		send(ch, devicesKnown, prometheus.GaugeValue, float64(s.Devices))
		send(ch, devicesNew, prometheus.GaugeValue, float64(s.New))
		send(ch, devicesFirstSeen, prometheus.CounterValue, float64(s.NewTotal))
		send(ch, devicesEvicted, prometheus.CounterValue, float64(s.Evicted))
		send(ch, devicesNameCollisions, prometheus.CounterValue, float64(s.Collisions))
		for _, d := range s.Configured {
			send(ch, deviceQueries, prometheus.CounterValue, float64(d.Queries), d.Name)
		}
		send(ch, deviceQueries, prometheus.CounterValue, float64(s.OtherQueries), "other")
	}
	if c.neigh != nil {
		if s, ok := c.neigh(); ok {
			send(ch, neighbourEntries, prometheus.GaugeValue, float64(s.Entries))
			send(ch, neighbourEvents, prometheus.CounterValue, float64(s.Flaps), "flap")
			send(ch, neighbourEvents, prometheus.CounterValue, float64(s.Dropped), "dropped")
			send(ch, neighbourEvents, prometheus.CounterValue, float64(s.Rescans), "rescan")
			send(ch, neighbourEvents, prometheus.CounterValue, float64(s.Failures), "failure")
		}
	}
	if c.server != nil {
		o := c.server().ClientOptions
		send(ch, clientOptionsIgnored, prometheus.CounterValue, float64(o.MACUntrusted), "mac", "untrusted")
		send(ch, clientOptionsIgnored, prometheus.CounterValue, float64(o.SubnetUntrusted), "subnet", "untrusted")
		send(ch, clientOptionsIgnored, prometheus.CounterValue, float64(o.MACMalformed), "mac", "malformed")
		send(ch, clientOptionsIgnored, prometheus.CounterValue, float64(o.SubnetPartial), "subnet", "partial")
		send(ch, clientOptionsIgnored, prometheus.CounterValue, float64(o.ClientIDInvalid), "client_id", "invalid")
	}
}
