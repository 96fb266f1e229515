package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
)

// dohMediaType is the DoH message type (RFC 8484 §6).
const dohMediaType = "application/dns-message"

// dohMaxHeaderBytes bounds a response's headers; a DNS answer needs a few
// hundred bytes of them, and a hostile server should not make us buffer more.
const dohMaxHeaderBytes = 16 << 10

// dohPingAfter and dohPingTimeout are the HTTP/2 health check of a DoH
// connection: after dohPingAfter with no frame from the upstream the client
// sends a PING, and a connection whose PING goes unanswered for
// dohPingTimeout is closed, failing the exchanges on it. Without the check a
// black-holed connection (a path that died without a reset, a NAT that forgot
// us) stays the one connection every exchange and every backoff probe reuses
// until the kernel gives up retransmitting, minutes later. Together they end
// such a connection within 2.5 s of its last frame, the default
// attempt_timeout, so the next probe (1 s each, backoff_first apart) dials a
// new one. dohPingTimeout is far above the round trip of any live household
// path, so a slow but working upstream is not cut. The price is one small
// frame a second on a connection that sits idle until transportIdleTimeout
// lets it go; the pings do not keep it open.
const (
	dohPingAfter   = 1 * time.Second
	dohPingTimeout = 1500 * time.Millisecond
)

// DoH is a DNS-over-HTTPS client (RFC 8484) for one upstream: POST with
// application/dns-message over HTTP/2, concurrent exchanges multiplexed as
// streams on one pooled connection. It dials the configured address, never
// the URL's host, and verifies the certificate against tls_name. Exchange is
// safe for concurrent use.
type DoH struct {
	name    string   // redacted URL, for errors and logs
	url     string   // the full URL; its path may carry a token, so never in an error
	ep      Endpoint // its Scrub cleans an error's text of url's secret parts
	addr    string   // IP:port, never resolved
	tlsConf *tls.Config
	tr      *http.Transport
	log     *zap.Logger

	life  context.Context // ends in-progress dials on Close
	stop  context.CancelCauseFunc
	dials dialCounts // nxdns_upstream_connections_total

	mu     sync.Mutex // guards the fields below
	conns  map[*dohConn]struct{}
	closed bool
}

var _ Client = (*DoH)(nil)

// NewDoH makes a DoH client for ep. roots is the trust for the upstream's
// certificate (nil: the system roots; see LoadRoots); the certificate must
// carry ep.TLSName. logger may be nil.
func NewDoH(ep Endpoint, roots *x509.CertPool, logger *zap.Logger) *DoH {
	if logger == nil {
		logger = zap.NewNop()
	}
	life, stop := context.WithCancelCause(context.Background())
	d := &DoH{
		name:    ep.Redacted(),
		url:     ep.URL.String(),
		ep:      ep,
		addr:    ep.Addr.String(),
		tlsConf: transportTLS(ep, roots, "h2"),
		log:     logger.Named("doh").With(zap.String("upstream", ep.Redacted())),
		life:    life,
		stop:    stop,
		conns:   make(map[*dohConn]struct{}),
	}
	d.tr = &http.Transport{
		DialTLSContext:    d.dialTLS,
		ForceAttemptHTTP2: true, // a custom dialer turns HTTP/2 off unless forced
		// With HTTP/2 this limits dials in progress, not connections: a cold
		// burst waits for one handshake and then shares its connection,
		// instead of dialing once per query (docs/design.md#burst-staircase).
		// Once the connection is up, no query waits for a handshake
		// (docs/design.md#dot-client): every exchange is a stream on it, and the pool sends one
		// upstream at most DefaultSlots (32) at once, far below the 100
		// concurrent streams RFC 9113 §6.5.2 recommends servers allow (Go's
		// server allows 250, unbound 100). Only past the server's stream limit
		// would net/http dial a second connection, and then this cap makes
		// the extra stream wait for a free one rather than for a handshake.
		MaxConnsPerHost:        1,
		IdleConnTimeout:        transportIdleTimeout,
		DisableCompression:     true, // DNS messages are small; no gzip to decode
		MaxResponseHeaderBytes: dohMaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout:  dohPingAfter,
			PingTimeout:      dohPingTimeout,
			WriteByteTimeout: transportWriteTimeout,
		},
	}
	return d
}

// Dials is how many connections this client dialed, by outcome.
func (d *DoH) Dials() Dials { return d.dials.load() }

// Exchange sends m and returns the validated response with m's ID restored.
// Failures are *AttemptError; none of them names more than the redacted URL.
func (d *DoH) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	wire, err := packPadded(m)
	if err != nil {
		// The handler parsed this query: failing to pack it is our bug.
		return nil, &AttemptError{Upstream: d.name, Kind: KindNoResources, Err: fmt.Errorf("pack query: %w", err)}
	}
	// RFC 8484 §4.1: ID 0 on the wire keeps responses cacheable by HTTP.
	wire[0], wire[1] = 0, 0
	resp, err := dohRoundTrip(ctx, d.tr, d.url, wire)
	if err != nil {
		return nil, d.error(ctx, err)
	}
	if err := dohCheck(m, resp); err != nil {
		return nil, d.error(ctx, err)
	}
	return resp, nil
}

// dohCheck checks a DoH answer (HTTP/2 or HTTP/3) to m: ID 0 on the wire
// (RFC 8484 §4.1), then the stream validation; it restores m's ID.
func dohCheck(m, resp *dns.Msg) error {
	if resp.Id != 0 {
		return &AttemptError{Kind: KindResponseMismatch, Err: fmt.Errorf("id %d, want 0", resp.Id)}
	}
	resp.Id = m.Id
	return ValidateStream(m, resp)
}

// dohRoundTrip posts one query through rt (HTTP/2 or HTTP/3) and checks the
// HTTP layer of the answer: status, content type and size
// (docs/design.md#doh-client).
func dohRoundTrip(ctx context.Context, rt http.RoundTripper, url string, wire []byte) (*dns.Msg, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(wire))
	if err != nil {
		return nil, err // the URL was parsed when configured; this is our bug
	}
	req.Header.Set("Content-Type", dohMediaType)
	req.Header.Set("Accept", dohMediaType)
	// RoundTrip, not http.Client.Do: no redirects to follow, no cookies, and
	// no *url.Error carrying the full URL into our error text.
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, &AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("HTTP status %d", resp.StatusCode)}
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != dohMediaType {
		return nil, &AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("content type %.64q", resp.Header.Get("Content-Type"))}
	}
	if resp.ContentLength > MaxResponseSize {
		return nil, &AttemptError{Kind: KindResponseTooLarge, Err: fmt.Errorf("content length %d", resp.ContentLength)}
	}
	// One byte over the limit is enough to know the body is too large;
	// Unpack reports it as KindResponseTooLarge.
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseSize+1))
	if err != nil {
		return nil, err
	}
	return Unpack(body)
}

// error classifies err and scrubs every trace of the URL's secret parts from
// its text (Endpoint.Scrub): a transport error might quote the request line.
func (d *DoH) error(ctx context.Context, err error) *AttemptError {
	return dohError(ctx, d.life, d.ep, err)
}

// dohError is DoH.error for both DoH clients: life is the client's, ended
// by Close.
func dohError(ctx, life context.Context, ep Endpoint, err error) *AttemptError {
	if life.Err() != nil {
		err = errClientClosed // Close cut the connection: a cancellation, not evidence
	}
	ae := transportError(ctx, ep.Redacted(), err)
	if msg := ae.Err.Error(); ep.Scrub(msg) != msg {
		ae.Err = errors.New(ep.Scrub(msg)) // the Kind is decided; the chain must not leak either
	}
	return ae
}

// dialTLS connects to the configured address whatever host net/http asks
// for (the URL's host is never resolved, docs/design.md#config-upstreams), and insists on HTTP/2:
// multiplexing is the point, and RFC 8484 §5.2 recommends it as the minimum.
// net/http detaches dials from the request's context, so the dial is bounded
// by transportDialTimeout and by Close.
func (d *DoH) dialTLS(ctx context.Context, _, _ string) (net.Conn, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(d.life, cancel)
	defer stop()
	tc, err := transportDial(ctx, d.addr, d.tlsConf, d.track)
	if err == nil {
		if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
			tc.Close()
			tc, err = nil, fmt.Errorf("upstream negotiated %q, not HTTP/2 (h2): %w", p, KindNetwork)
		}
	}
	if err != nil && d.life.Err() != nil {
		err = errClientClosed
	}
	d.dials.count(tc, err)
	if err != nil {
		return nil, err
	}
	d.log.Debug("connected", zap.Bool("resumed", tc.ConnectionState().DidResume))
	return tc, nil
}

// dohConn is a TCP connection under a DoH TLS connection, tracked so that
// Close can end connections net/http still considers busy.
type dohConn struct {
	net.Conn
	d    *DoH
	once sync.Once
}

func (c *dohConn) Close() error {
	c.once.Do(func() {
		c.d.mu.Lock()
		delete(c.d.conns, c)
		c.d.mu.Unlock()
	})
	return c.Conn.Close()
}

// track registers a new TCP connection, or closes it when Close came first.
func (d *DoH) track(raw net.Conn) (net.Conn, error) {
	c := &dohConn{Conn: raw, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		raw.Close()
		return nil, errClientClosed
	}
	d.conns[c] = struct{}{}
	return c, nil
}

// Close ends every connection, busy or idle, and every dial in progress.
// Exchanges still running fail as cancelled. net/http owns the connections'
// reader goroutines; they end as soon as their connection is closed.
func (d *DoH) Close() error {
	d.mu.Lock()
	d.closed = true
	conns := make([]*dohConn, 0, len(d.conns))
	for c := range d.conns {
		conns = append(conns, c)
	}
	d.mu.Unlock()
	d.stop(errClientClosed)
	for _, c := range conns {
		c.Close()
	}
	d.tr.CloseIdleConnections()
	return nil
}
