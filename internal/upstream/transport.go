package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/wireform"
)

// transportSessionCacheSize bounds the TLS session cache of one upstream. The
// cache is keyed by server name, and one upstream has one name, so a handful
// of entries is plenty; it exists so that a redial resumes the session
// instead of paying a full handshake (docs/design.md#dot-client).
const transportSessionCacheSize = 4

// transportDialTimeout caps one TCP connect plus TLS handshake when the
// caller's context has a later deadline or none (for example a probe without
// a budget). A handshake slower than this on a household link means a broken
// path, and the failure is the upstream's own timeout (KindPeerTimeout).
const transportDialTimeout = 5 * time.Second

// transportIdleTimeout closes a connection that carried no exchange for this
// long. Long enough to keep a browsing session's bursts on a warm connection;
// shorter than common server-side limits (unbound's tcp-idle-timeout is 30 s),
// so we usually close first and rarely meet a connection the server already
// dropped. No keepalive probes: an idle connection is simply let go.
const transportIdleTimeout = 20 * time.Second

// transportWriteTimeout bounds one write to an upstream. A DNS query fits a
// socket buffer many times over, so a write that blocks this long means the
// peer stopped reading; the transport's own timer firing is KindPeerTimeout.
const transportWriteTimeout = 3 * time.Second

// errClientClosed ends exchanges still running when Close is called: the
// server is shutting down or reloading, which is a cancellation, not
// evidence about the upstream.
var errClientClosed = fmt.Errorf("upstream client closed: %w", KindCanceled)

// NewClient builds the transport for ep: DoT for tls://, DoH for https://,
// DoQ for quic://, DoH over HTTP/3 for h3://.
// caPEM, when not empty, holds PEM certificates trusted on top of the
// system roots (docs/design.md#config-upstreams ca_file, as config.ReadFiles read it once: the file
// checked is the file used, and nothing here touches the file system);
// there is no way to skip verification. logger may be nil.
func NewClient(ep Endpoint, caPEM []byte, logger *zap.Logger) (Client, error) {
	roots, err := LoadRoots(caPEM)
	if err != nil {
		return nil, err
	}
	switch ep.Scheme {
	case SchemeDoT:
		return NewDoT(ep, roots, logger), nil
	case SchemeDoH:
		return NewDoH(ep, roots, logger), nil
	case SchemeDoQ:
		return NewDoQ(ep, roots, logger), nil
	case SchemeDoH3:
		return NewDoH3(ep, roots, logger), nil
	}
	return nil, fmt.Errorf("%s: unsupported scheme %q", ep.Redacted(), ep.Scheme)
}

// LoadRoots returns the trust for an upstream: nil (the system roots, which
// crypto/tls loads itself) when caPEM is empty, otherwise a copy of the
// system roots plus every certificate in caPEM. PEM without a single
// certificate is an error rather than a silent fallback to system roots.
func LoadRoots(caPEM []byte) (*x509.CertPool, error) {
	if len(caPEM) == 0 {
		return nil, nil
	}
	roots, err := x509.SystemCertPool() // a fresh copy on every call
	if err != nil {
		roots = x509.NewCertPool() // no system store (a minimal image): ca_file alone
	}
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("ca_file: no PEM certificate found")
	}
	return roots, nil
}

// transportTLS is the client TLS configuration of one upstream: verify the
// certificate against tls_name with roots (nil: system roots), resume
// sessions through a cache shared by all of the upstream's connections.
func transportTLS(ep Endpoint, roots *x509.CertPool, nextProtos ...string) *tls.Config {
	return &tls.Config{
		ServerName:         ep.TLSName,
		RootCAs:            roots,
		MinVersion:         tls.VersionTLS12,
		NextProtos:         nextProtos,
		ClientSessionCache: tls.NewLRUClientSessionCache(transportSessionCacheSize),
	}
}

// transportDial connects to addr and completes the TLS handshake under ctx,
// capped at transportDialTimeout. The address is always an IP: an upstream's
// name is never resolved (docs/design.md#config-upstreams). wrap, if not nil, may wrap the TCP
// connection before TLS runs over it.
func transportDial(ctx context.Context, addr string, conf *tls.Config,
	wrap func(net.Conn) (net.Conn, error)) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, transportDialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		if raw, err = wrap(raw); err != nil {
			return nil, err
		}
	}
	tc := tls.Client(raw, conf)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close() // the handshake failed: nothing to say politely
		return nil, err
	}
	return tc, nil
}

// transportError builds the one error an exchange returns: the redacted
// upstream, a Kind and the cause for the log.
func transportError(ctx context.Context, upstream string, err error) *AttemptError {
	kind := KindOf(ctx, err)
	var ae *AttemptError
	if errors.As(err, &ae) && ae.Upstream == "" {
		err = ae.Err // Validate and Unpack leave Upstream empty; do not repeat the kind
	}
	return &AttemptError{Upstream: upstream, Kind: kind, Err: err}
}

// Dials is how many connections a client dialed, by outcome
// (nxdns_upstream_connections_total, docs/design.md#dot-client): New is a full TLS handshake,
// Resumed a session resumption, Failed a dial or handshake that produced no
// connection (refused, timed out, a bad certificate, or cut short by the
// query that started it). A dial ended by Close counts in none.
type Dials struct {
	New, Resumed, Failed uint64
	// ZeroRTTAccepted and ZeroRTTRejected count the DoQ dials that sent
	// 0-RTT, by the server's answer (nxdns_upstream_zero_rtt_total).
	ZeroRTTAccepted, ZeroRTTRejected uint64
}

// dialCounts is the atomic form of Dials, kept by a transport.
type dialCounts struct {
	new, resumed, failed atomic.Uint64
}

// count records one dial's outcome: tc is the connection (nil on failure).
func (d *dialCounts) count(tc *tls.Conn, err error) {
	d.record(err, err == nil && tc.ConnectionState().DidResume)
}

// record counts one dial's outcome: err is the dial's error, resumed whether
// its TLS handshake resumed a session.
func (d *dialCounts) record(err error, resumed bool) {
	switch {
	case err == nil && resumed:
		d.resumed.Add(1)
	case err == nil:
		d.new.Add(1)
	case !errors.Is(err, errClientClosed):
		d.failed.Add(1)
	}
}

func (d *dialCounts) load() Dials {
	return Dials{New: d.new.Load(), Resumed: d.resumed.Load(), Failed: d.failed.Load()}
}

// packPadded packs a query for an encrypted upstream with EDNS(0) Padding
// to a multiple of 128 octets (RFC 8467 §4.1), so its length says little
// about the name asked: this is the hop that crosses the internet. A query
// without an OPT record goes unpadded (RFC 7830 §3: padding is an EDNS
// option); nxdns's own queries always have one. The query is packed into a
// buffer with room for its padding, so that Pad pads it in place: the wire
// form is the one allocation (docs/performance.md, "What is left, and the
// floor").
func packPadded(m *dns.Msg) ([]byte, error) {
	plain := *m
	plain.Compress = false // Len without a compression map: never less than the packed length
	n := plain.Len()
	room := n + 1 // PackBuffer's own need: one more than the length
	if m.IsEdns0() != nil {
		room = max(room, wireform.PaddedLen(n, wireform.QueryBlock, dns.MaxMsgSize))
	}
	wire, err := m.PackBuffer(make([]byte, room))
	if err != nil {
		return nil, err
	}
	wire, _ = wireform.Pad(wire, wireform.QueryBlock, dns.MaxMsgSize)
	return wire, nil
}
