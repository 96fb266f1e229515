package metrics

import (
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
