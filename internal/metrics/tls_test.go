package metrics

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/tlscert"
)

var sampleExpiry = time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)

func sampleTLS() server.TLSSnapshot {
	return server.TLSSnapshot{
		DoT:       server.FrontSnapshot{RefusedNotAllowed: 1, RefusedCapacity: 2, HandshakeTimeouts: 3, HandshakeFailures: 4, RefusedShare: 13},
		DoH:       server.FrontSnapshot{RefusedNotAllowed: 5, RefusedCapacity: 6, HandshakeTimeouts: 7, HandshakeFailures: 8, RefusedShare: 14},
		DoQ:       server.FrontSnapshot{RefusedNotAllowed: 15, RefusedShare: 16, HandshakeTimeouts: 17, HandshakeFailures: 18, Retries: 19},
		DoH3:      server.FrontSnapshot{RefusedNotAllowed: 20, RefusedShare: 21, HandshakeTimeouts: 22, HandshakeFailures: 23, Retries: 24},
		DoHErrors: []server.StatusCount{{Status: 400, Count: 9}, {Status: 413, Count: 10}},
	}
}

func sampleCert() (tlscert.Status, bool) {
	return tlscert.Status{NotAfter: sampleExpiry, ReloadsOK: 11, ReloadsFailed: 12}, true
}

// TestTLS_seriesFromTheSnapshots: every TLS number reaches its series and
// labels unchanged, and the certificate series disappear without TLS.
func TestTLS_seriesFromTheSnapshots(t *testing.T) {
	fams := gatherNxdns(t, Sources{TLS: sampleTLS, Cert: sampleCert})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"nxdns_tls_cert_expiry_timestamp_seconds", nil, float64(sampleExpiry.Unix())},
		{"nxdns_tls_cert_reloads_total", map[string]string{"outcome": "failure"}, 12},
		{"nxdns_tls_connections_refused_total", map[string]string{"proto": "doh", "reason": "capacity"}, 6},
		{"nxdns_tls_connections_refused_total", map[string]string{"proto": "dot", "reason": "not_allowed"}, 1},
		{"nxdns_tls_connections_refused_total", map[string]string{"proto": "doh", "reason": "client_share"}, 14},
		{"nxdns_tls_handshake_failures_total", map[string]string{"proto": "dot", "reason": "timeout"}, 3},
		{"nxdns_tls_handshake_failures_total", map[string]string{"proto": "doh", "reason": "error"}, 8},
		{"nxdns_tls_connections_refused_total", map[string]string{"proto": "doq", "reason": "client_share"}, 16},
		{"nxdns_tls_handshake_failures_total", map[string]string{"proto": "doq", "reason": "timeout"}, 17},
		{"nxdns_tls_handshake_failures_total", map[string]string{"proto": "doq", "reason": "error"}, 18},
		{"nxdns_tls_connections_refused_total", map[string]string{"proto": "h3", "reason": "not_allowed"}, 20},
		{"nxdns_tls_handshake_failures_total", map[string]string{"proto": "h3", "reason": "timeout"}, 22},
		{"nxdns_tls_handshake_failures_total", map[string]string{"proto": "h3", "reason": "error"}, 23},
		{"nxdns_quic_retries_total", map[string]string{"proto": "h3"}, 24},
		{"nxdns_doh_errors_total", map[string]string{"status": "413"}, 10},
	} {
		if got := value(sample(t, fams, c.name, c.labels)); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	noCert := gatherNxdns(t, Sources{TLS: sampleTLS, Cert: func() (tlscert.Status, bool) { return tlscert.Status{}, false }})
	if _, ok := noCert["nxdns_tls_cert_expiry_timestamp_seconds"]; ok {
		t.Error("an expiry series without a certificate")
	}
}

// TestTLS_everySeriesOfEveryFront pins the whole output of the TLS collector:
// each front's refusal and handshake series, with no capacity row for DoQ and
// h3 (they have no connection cap, docs/reference/metrics.md), and nothing else.
func TestTLS_everySeriesOfEveryFront(t *testing.T) {
	fams := gatherNxdns(t, Sources{TLS: sampleTLS, Cert: sampleCert})
	var got []string
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, lp := range m.GetLabel() {
				labels = append(labels, lp.GetName()+"="+lp.GetValue())
			}
			got = append(got, fmt.Sprintf("%s %s{%s} %v", mf.GetType(), name, strings.Join(labels, ","), value(m)))
		}
	}
	slices.Sort(got)
	want := []string{
		"COUNTER nxdns_doh_errors_total{status=400} 9",
		"COUNTER nxdns_doh_errors_total{status=413} 10",
		"COUNTER nxdns_quic_retries_total{proto=doq} 19",
		"COUNTER nxdns_quic_retries_total{proto=h3} 24",
		"COUNTER nxdns_tls_cert_reloads_total{outcome=failure} 12",
		"COUNTER nxdns_tls_cert_reloads_total{outcome=success} 11",
		"COUNTER nxdns_tls_connections_refused_total{proto=doh,reason=capacity} 6",
		"COUNTER nxdns_tls_connections_refused_total{proto=doh,reason=client_share} 14",
		"COUNTER nxdns_tls_connections_refused_total{proto=doh,reason=not_allowed} 5",
		"COUNTER nxdns_tls_connections_refused_total{proto=doq,reason=client_share} 16",
		"COUNTER nxdns_tls_connections_refused_total{proto=doq,reason=not_allowed} 15",
		"COUNTER nxdns_tls_connections_refused_total{proto=dot,reason=capacity} 2",
		"COUNTER nxdns_tls_connections_refused_total{proto=dot,reason=client_share} 13",
		"COUNTER nxdns_tls_connections_refused_total{proto=dot,reason=not_allowed} 1",
		"COUNTER nxdns_tls_connections_refused_total{proto=h3,reason=client_share} 21",
		"COUNTER nxdns_tls_connections_refused_total{proto=h3,reason=not_allowed} 20",
		"COUNTER nxdns_tls_handshake_failures_total{proto=doh,reason=error} 8",
		"COUNTER nxdns_tls_handshake_failures_total{proto=doh,reason=timeout} 7",
		"COUNTER nxdns_tls_handshake_failures_total{proto=doq,reason=error} 18",
		"COUNTER nxdns_tls_handshake_failures_total{proto=doq,reason=timeout} 17",
		"COUNTER nxdns_tls_handshake_failures_total{proto=dot,reason=error} 4",
		"COUNTER nxdns_tls_handshake_failures_total{proto=dot,reason=timeout} 3",
		"COUNTER nxdns_tls_handshake_failures_total{proto=h3,reason=error} 23",
		"COUNTER nxdns_tls_handshake_failures_total{proto=h3,reason=timeout} 22",
		fmt.Sprintf("GAUGE nxdns_tls_cert_expiry_timestamp_seconds{} %v", float64(sampleExpiry.Unix())),
	}
	if !slices.Equal(got, want) {
		t.Errorf("TLS series:\n got %q\nwant %q", got, want)
	}
}
