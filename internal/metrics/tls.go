package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/tlscert"
)

// DoT/DoH serving series (docs/design.md#tls-serving).
var (
	tlsCertExpiry = prometheus.NewDesc("nxdns_tls_cert_expiry_timestamp_seconds",
		"Unix time at which the DoT/DoH serving certificate expires (the one serving now: a renewal that did not load leaves the old date). Alert well before it: phones refuse an expired certificate.",
		nil, nil)
	tlsCertReloads = prometheus.NewDesc("nxdns_tls_cert_reloads_total",
		"Changes of the certificate files, by outcome: success (the new pair serves new handshakes), failure (it did not load; the previous pair keeps serving).",
		[]string{"outcome"}, nil)
	tlsRefused = prometheus.NewDesc("nxdns_tls_connections_refused_total",
		"DoT, DoH, DoQ and DoH3 (proto h3) connections closed at accept, before any TLS work, by proto and reason: not_allowed (the peer is outside dns.allow; DoQ and h3: at its first packet), client_share (the client already held its share of the TCP cap, shared with plain TCP; DoQ and h3: of its own connections, after the handshake), capacity (the TCP per-family connection cap, shared with plain TCP, was reached; not DoQ or h3).",
		[]string{"proto", "reason"}, nil)
	tlsHandshakeFailures = prometheus.NewDesc("nxdns_tls_handshake_failures_total",
		"DoT and DoH connections cut off in the TLS handshake, by proto and reason: timeout (no handshake within the bound), error (not TLS, only TLS 1.0/1.1 offered, no common cipher, a rejected certificate).",
		[]string{"proto", "reason"}, nil)
	quicRetries = prometheus.NewDesc("nxdns_quic_retries_total",
		"Initial packets a QUIC listener answered with a Retry (address validation) because many handshakes were in progress, by proto: doq, h3.",
		[]string{"proto"}, nil)
	dohErrors = prometheus.NewDesc("nxdns_doh_errors_total",
		"DoH requests answered with an HTTP error, by status: 400 (no or malformed dns parameter, not a DNS query), 404 (another path than /dns-query), 405 (neither GET nor POST), 413 (a POST body over the query size limit), 414 (a GET dns parameter over it), 415 (a POST that is not application/dns-message), 503 (no answer: shutting down).",
		[]string{"status"}, nil)
)

// tlsCollector reads the server's TLS counters and, when nxdns serves TLS,
// the certificate store's status.
type tlsCollector struct {
	snap func() server.TLSSnapshot
	cert func() (tlscert.Status, bool)
}

func (tlsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tlsCertExpiry, tlsCertReloads, tlsRefused, tlsHandshakeFailures, quicRetries, dohErrors} {
		ch <- d
	}
}

func (c tlsCollector) Collect(ch chan<- prometheus.Metric) {
	if c.cert != nil {
		if st, ok := c.cert(); ok {
			send(ch, tlsCertExpiry, prometheus.GaugeValue, float64(st.NotAfter.Unix()))
			send(ch, tlsCertReloads, prometheus.CounterValue, float64(st.ReloadsOK), "success")
			send(ch, tlsCertReloads, prometheus.CounterValue, float64(st.ReloadsFailed), "failure")
		}
	}
	s := c.snap()
	// DoQ and DoH over HTTP/3 (docs/server.md "DNS over QUIC", "DoH over
	// HTTP/3") refuse not_allowed at the first packet and client_share over
	// the client's connections, and have no connection cap: no capacity row.
	for _, f := range []struct {
		proto  string
		snap   server.FrontSnapshot
		capped bool // shares the TCP per-family connection cap
	}{{"dot", s.DoT, true}, {"doh", s.DoH, true}, {"doq", s.DoQ, false}, {"h3", s.DoH3, false}} {
		send(ch, tlsRefused, prometheus.CounterValue, float64(f.snap.RefusedNotAllowed), f.proto, "not_allowed")
		send(ch, tlsRefused, prometheus.CounterValue, float64(f.snap.RefusedShare), f.proto, "client_share")
		if f.capped {
			send(ch, tlsRefused, prometheus.CounterValue, float64(f.snap.RefusedCapacity), f.proto, "capacity")
		}
		send(ch, tlsHandshakeFailures, prometheus.CounterValue, float64(f.snap.HandshakeTimeouts), f.proto, "timeout")
		send(ch, tlsHandshakeFailures, prometheus.CounterValue, float64(f.snap.HandshakeFailures), f.proto, "error")
	}
	send(ch, quicRetries, prometheus.CounterValue, float64(s.DoQ.Retries), "doq")
	send(ch, quicRetries, prometheus.CounterValue, float64(s.DoH3.Retries), "h3")
	for _, e := range s.DoHErrors {
		send(ch, dohErrors, prometheus.CounterValue, float64(e.Count), strconv.Itoa(e.Status))
	}
}
