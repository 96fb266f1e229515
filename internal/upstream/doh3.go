package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"go.uber.org/zap"
)

// DoH3 is a DNS-over-HTTPS client (RFC 8484) over HTTP/3 (RFC 9114) for one
// h3:// upstream: the POST of DoH, each exchange one request stream on one
// shared QUIC connection (quic-go's http3.Transport keeps it and shares a
// dial in progress between the requests waiting for it). As DoQ it dials
// the configured address, never the URL's host, verifies the certificate
// against tls_name, sends a PING after doqPingAfter of silence and lets
// QUIC end a connection that heard nothing for doqIdleTimeout; it closes
// the connection itself transportIdleTimeout after its last exchange. No
// 0-RTT: a POST is not idempotent to a server that cannot tell a replay
// (RFC 9114 §10.9). The query's context bounds every wait; the handshake
// itself runs under transportDialTimeout and Close only, so a query whose
// budget ends mid-handshake returns at its deadline and the handshake still
// serves the next query (docs/upstream-pool.md "DNS over HTTP/3").
// Exchange is safe for concurrent use.
type DoH3 struct {
	ep   Endpoint
	url  string // the request URL: https:// with the h3 URL's host, port, path and query
	addr string // IP:port, never resolved
	tr   *http3.Transport
	log  *zap.Logger

	life  context.Context // ends the dial in progress on Close
	stop  context.CancelCauseFunc
	dials dialCounts // nxdns_upstream_connections_total

	mu       sync.Mutex // guards the fields below; held across tr.CloseIdleConnections
	inflight int
	idle     *time.Timer // runs while inflight is 0 after the first exchange
	closed   bool
}

var _ Client = (*DoH3)(nil)

// NewDoH3 makes a DoH3 client for ep (scheme h3). roots is the trust for
// the upstream's certificate (nil: the system roots); the certificate must
// carry ep.TLSName. logger may be nil.
func NewDoH3(ep Endpoint, roots *x509.CertPool, logger *zap.Logger) *DoH3 {
	if logger == nil {
		logger = zap.NewNop()
	}
	life, stop := context.WithCancelCause(context.Background())
	u := *ep.URL
	u.Scheme = "https" // what http3.Transport accepts; the dial goes to addr anyway
	d := &DoH3{
		ep:   ep,
		url:  u.String(),
		addr: ep.Addr.String(),
		log:  logger.Named("doh3").With(zap.String("upstream", ep.Redacted())),
		life: life,
		stop: stop,
	}
	tlsConf := transportTLS(ep, roots, http3.NextProtoH3)
	tlsConf.MinVersion = tls.VersionTLS13 // QUIC is TLS 1.3 only (RFC 9001 §4.2)
	d.tr = &http3.Transport{
		TLSClientConfig: tlsConf,
		QUICConfig: &quic.Config{
			HandshakeIdleTimeout: transportDialTimeout,
			MaxIdleTimeout:       doqIdleTimeout,
			KeepAlivePeriod:      doqPingAfter,
			// The server opens no request streams (RFC 9114 §6.1); its
			// control and QPACK streams are unidirectional, quic-go's default.
			MaxIncomingStreams: -1,
		},
		Dial:                   d.dial,
		DisableCompression:     true,
		MaxResponseHeaderBytes: dohMaxHeaderBytes,
	}
	return d
}

// Dials is how many connections this client dialed, by outcome.
func (d *DoH3) Dials() Dials { return d.dials.load() }

// Exchange posts m and returns the validated response with m's ID restored.
// Failures are *AttemptError; none of them names more than the redacted URL.
func (d *DoH3) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	wire, err := packQUIC(m)
	if err != nil {
		return nil, &AttemptError{Upstream: d.ep.Redacted(), Kind: KindNoResources, Err: fmt.Errorf("pack query: %w", err)}
	}
	wire[0], wire[1] = 0, 0 // RFC 8484 §4.1
	if !d.begin() {
		return nil, d.error(ctx, errClientClosed)
	}
	var connected atomic.Bool
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	resp, err := dohRoundTrip(traced, d.tr, d.url, wire)
	d.end()
	if err != nil && !connected.Load() && ctx.Err() != nil {
		// Said in the error so the backoff log reads as what it most likely
		// is, as DoQ's does: a path that drops UDP to the upstream
		// (docs/how-to/troubleshoot.md).
		err = fmt.Errorf("QUIC handshake with %s not finished: %w", d.addr, err)
	}
	if err != nil {
		return nil, d.error(ctx, err)
	}
	if err := dohCheck(m, resp); err != nil {
		return nil, d.error(ctx, err)
	}
	return resp, nil
}

// begin counts one exchange in flight; false once Close has run.
func (d *DoH3) begin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.inflight++
	if d.idle != nil {
		d.idle.Stop()
	}
	return true
}

// end ends one exchange and starts the idle timer when it was the last.
func (d *DoH3) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight--
	if d.inflight > 0 || d.closed {
		return
	}
	if d.idle == nil {
		d.idle = time.AfterFunc(transportIdleTimeout, d.closeIdle)
	} else {
		d.idle.Reset(transportIdleTimeout)
	}
}

// closeIdle closes the connection if no exchange began since the timer
// started. d.mu is held throughout, so no exchange can begin in between.
func (d *DoH3) closeIdle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight == 0 && !d.closed {
		d.tr.CloseIdleConnections()
	}
}

// dial is http3.Transport's dial: to the configured address whatever host
// it asks for (docs/design.md#config-upstreams), with ALPN h3 insisted on.
// http3.Transport detaches it from the request, so it is bounded by
// transportDialTimeout and Close.
func (d *DoH3) dial(ctx context.Context, _ string, tlsConf *tls.Config, qconf *quic.Config) (*quic.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, transportDialTimeout)
	defer cancel()
	stop := context.AfterFunc(d.life, cancel)
	defer stop()
	qc, err := quic.DialAddr(ctx, d.addr, tlsConf, qconf)
	if err == nil {
		if p := qc.ConnectionState().TLS.NegotiatedProtocol; p != http3.NextProtoH3 {
			qc.CloseWithError(quic.ApplicationErrorCode(http3.ErrCodeNoError), "")
			qc, err = nil, fmt.Errorf("upstream negotiated %q, not HTTP/3 (h3): %w", p, KindNetwork)
		}
	}
	switch {
	case err != nil && d.life.Err() != nil:
		err = errClientClosed
	case err != nil && ctx.Err() != nil:
		// Our dial cap fired (the request's budget does not reach here):
		// the upstream's own slowness, whatever error quic-go wrapped it in.
		err = fmt.Errorf("QUIC handshake with %s not done within %v: %w", d.addr, transportDialTimeout, KindPeerTimeout)
	}
	resumed := err == nil && qc.ConnectionState().TLS.DidResume
	d.dials.record(err, resumed)
	if err != nil {
		return nil, err
	}
	d.log.Debug("connected", zap.Bool("resumed", resumed))
	return qc, nil
}

// error classifies err and scrubs the URL's secret parts from its text.
func (d *DoH3) error(ctx context.Context, err error) *AttemptError {
	return dohError(ctx, d.life, d.ep, err)
}

// Close closes the connection and ends the dial in progress; exchanges
// still running fail as cancelled.
func (d *DoH3) Close() error {
	d.stop(errClientClosed)
	d.mu.Lock()
	d.closed = true
	if d.idle != nil {
		d.idle.Stop()
	}
	d.mu.Unlock()
	return d.tr.Close()
}
