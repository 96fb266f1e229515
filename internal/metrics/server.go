package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/server"
)

// Query and listener series (docs/design.md#metrics). Queries refused by the access list
// are nxdns_queries_total{source="refused"}; there is no second series for
// them (server.Snapshot.Refused is the same number summed).
var (
	queriesTotal = prometheus.NewDesc("nxdns_queries_total",
		"Queries handled, by source (pool; zone:<zone> for a forward zone; refused: client outside dns.allow; server: rejected as malformed or unsupported) and by the rcode sent (none: no answer was sent because the query was cancelled).",
		[]string{"source", "rcode"}, nil)
	queryDuration = prometheus.NewDesc("nxdns_query_duration_seconds",
		"Seconds from reading a query to its answer being ready, for queries sent to the pool or a forward zone (refused and rejected queries are left out so they do not flatter it).",
		nil, nil)
	listenerUDPInFlight = prometheus.NewDesc("nxdns_listener_udp_in_flight",
		"UDP queries being answered now, all listeners, sampled at scrape time (capped per address family; over the cap a query is dropped).",
		nil, nil)
	listenerTCPConns = prometheus.NewDesc("nxdns_listener_tcp_connections",
		"TCP connections open now, all listeners, sampled at scrape time (capped per address family; over the cap a connection is refused).",
		nil, nil)
	listenerDropped = prometheus.NewDesc("nxdns_listener_dropped_total",
		"Query messages dropped without an answer, by reason: udp_over_capacity (the UDP in-flight cap was reached; the client retries), udp_client_share (the client already had its share of the cap in flight), kernel_receive_queue (the kernel dropped the datagram before nxdns read it: its receive queue was full), bad_source (from source port 0 or a non-unicast address, or sent to a broadcast or multicast address), malformed (shorter than a DNS header, a response rather than a query, or an oversized TCP message), undelivered (an answer was ready but its write failed; the query counts as rcode none).",
		[]string{"reason"}, nil)
	listenerTCPRefused = prometheus.NewDesc("nxdns_listener_tcp_refused_total",
		"TCP connections closed at once, by reason: capacity (the TCP connection cap was reached), client_share (the client already held its share of the cap), not_allowed (the client is outside dns.allow).",
		[]string{"reason"}, nil)
	queriesByProto = prometheus.NewDesc("nxdns_queries_by_proto_total",
		"Queries handled, by the transport they arrived on: udp, tcp, dot (DNS over TLS, RFC 7858), doh (DNS over HTTPS, RFC 8484).",
		[]string{"proto"}, nil)
	listenerTCPClosed = prometheus.NewDesc("nxdns_listener_tcp_closed_total",
		"TCP connections closed by nxdns, by reason: idle (no query within the idle bound; normal, RFC 7766), slow (the client was too slow sending a query or reading an answer).",
		[]string{"reason"}, nil)
)

// serverCollector reads the server's Snapshot at scrape time.
type serverCollector struct{ snap func() server.Snapshot }

func (serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		queriesTotal, queryDuration, listenerUDPInFlight, listenerTCPConns,
		listenerDropped, listenerTCPRefused, listenerTCPClosed, queriesByProto,
	} {
		ch <- d
	}
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	for _, q := range s.Queries {
		send(ch, queriesTotal, prometheus.CounterValue, float64(q.Count), q.Source, q.Rcode)
	}
	for _, p := range s.Protos {
		send(ch, queriesByProto, prometheus.CounterValue, float64(p.Count), p.Proto)
	}
	sendHistogram(ch, queryDuration, s.Latency)
	send(ch, listenerUDPInFlight, prometheus.GaugeValue, float64(s.UDPInFlight))
	send(ch, listenerTCPConns, prometheus.GaugeValue, float64(s.TCPConns))
	send(ch, listenerDropped, prometheus.CounterValue, float64(s.UDPDropped), "udp_over_capacity")
	send(ch, listenerDropped, prometheus.CounterValue, float64(s.UDPClientShare), "udp_client_share")
	send(ch, listenerDropped, prometheus.CounterValue, float64(s.UDPKernel), "kernel_receive_queue")
	send(ch, listenerDropped, prometheus.CounterValue, float64(s.UDPBadSource), "bad_source")
	send(ch, listenerDropped, prometheus.CounterValue, float64(s.Malformed), "malformed")
	send(ch, listenerDropped, prometheus.CounterValue, float64(s.Undelivered), "undelivered")
	send(ch, listenerTCPRefused, prometheus.CounterValue, float64(s.TCPRefused), "capacity")
	send(ch, listenerTCPRefused, prometheus.CounterValue, float64(s.TCPClientShare), "client_share")
	send(ch, listenerTCPRefused, prometheus.CounterValue, float64(s.TCPNotAllowed), "not_allowed")
	send(ch, listenerTCPClosed, prometheus.CounterValue, float64(s.TCPIdleClosed), "idle")
	send(ch, listenerTCPClosed, prometheus.CounterValue, float64(s.TCPSlowClosed), "slow")
}
