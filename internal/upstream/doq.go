package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"go.uber.org/zap"
)

// doqALPN is the TLS application protocol of DNS over QUIC (RFC 9250 §4.1.1).
const doqALPN = "doq"

// The DoQ error codes (RFC 9250 §4.3), sent in CONNECTION_CLOSE,
// RESET_STREAM and STOP_SENDING.
const (
	DoQNoError          = 0x0 // DOQ_NO_ERROR: no error, e.g. closing an idle connection
	DoQInternalError    = 0x1 // DOQ_INTERNAL_ERROR
	DoQProtocolError    = 0x2 // DOQ_PROTOCOL_ERROR: the peer broke RFC 9250's framing
	DoQRequestCancelled = 0x3 // DOQ_REQUEST_CANCELLED: the client gave up on a query
	DoQExcessiveLoad    = 0x4 // DOQ_EXCESSIVE_LOAD
	DoQUnspecifiedError = 0x5 // DOQ_UNSPECIFIED_ERROR
)

var doqCodeText = map[uint64]string{
	DoQNoError:          "DOQ_NO_ERROR",
	DoQInternalError:    "DOQ_INTERNAL_ERROR",
	DoQProtocolError:    "DOQ_PROTOCOL_ERROR",
	DoQRequestCancelled: "DOQ_REQUEST_CANCELLED",
	DoQExcessiveLoad:    "DOQ_EXCESSIVE_LOAD",
	DoQUnspecifiedError: "DOQ_UNSPECIFIED_ERROR",
}

// doqCodeName names a DoQ error code for the log; an unknown code is shown
// in hex (RFC 9250 §4.3 lets a peer use other codes, to be treated as
// DOQ_UNSPECIFIED_ERROR).
func doqCodeName(code uint64) string {
	if s, ok := doqCodeText[code]; ok {
		return s
	}
	return fmt.Sprintf("DoQ error %#x", code)
}

// doqPingAfter and doqIdleTimeout are the liveness check of a DoQ
// connection, QUIC's counterpart of the DoH client's HTTP/2 pings
// (dohPingAfter): the client sends a PING after doqPingAfter without
// sending, and QUIC ends a connection that received nothing for
// doqIdleTimeout (RFC 9000 §10.1; the effective timeout is the smaller of
// both peers' values). A black-holed path therefore costs at most a few
// seconds of failed attempts before the next exchange dials anew, instead
// of every exchange and probe waiting on a dead connection. The pings do
// not make the connection permanent: transportIdleTimeout after its last
// exchange the client closes it with DOQ_NO_ERROR (docs/upstream-pool.md
// "DNS over QUIC (DoQ)").
const (
	doqPingAfter   = 1 * time.Second
	doqIdleTimeout = 3 * time.Second
)

// DoQ is a DNS-over-QUIC client (RFC 9250) for one upstream: each exchange
// is one bidirectional stream on one shared QUIC connection, so concurrent
// queries never wait behind each other and a lost packet stalls only the
// streams it carried. It dials the configured address, never the URL's host,
// verifies the certificate against tls_name, and redials when the connection
// ends. A redial that resumes a session whose ticket allows early data sends
// standard queries in 0-RTT; anything else waits for the handshake, and a
// query whose 0-RTT the server rejected is sent again once in 1-RTT
// (RFC 9250 §4.5; docs/upstream-pool.md "DNS over QUIC (DoQ)"). Exchange is
// safe for concurrent use.
type DoQ struct {
	name    string // redacted URL, for errors and logs
	addr    string // IP:port, never resolved
	tlsConf *tls.Config
	qconf   *quic.Config
	log     *zap.Logger

	life       context.Context // ends the dial in progress on Close
	stop       context.CancelCauseFunc
	dials      dialCounts    // nxdns_upstream_connections_total
	zeroRTT    zeroRTTCounts // nxdns_upstream_zero_rtt_total
	resent     atomic.Uint64 // queries sent again in 1-RTT after a rejected 0-RTT
	recoveries atomic.Uint64 // nxdns_upstream_reuse_recoveries_total

	mu      sync.Mutex // guards the fields below
	cur     *doqConn   // the connection new exchanges use; nil when none
	dialing *doqDial   // the dial in progress, shared by every exchange waiting
	closed  bool
}

var _ Client = (*DoQ)(nil)

// doqConn is one QUIC connection with its exchanges in flight, counted so
// that it is closed transportIdleTimeout after the last one ends.
type doqConn struct {
	*quic.Conn
	inflight int         // guarded by DoQ.mu
	idle     *time.Timer // guarded by DoQ.mu; runs while inflight is 0
}

// confirmed waits, within ctx, for c's handshake to complete, and makes c
// usable again if the server rejected its 0-RTT (quic-go's NextConnection:
// until then every new stream fails with Err0RTTRejected). A connection
// dialed without 0-RTT returns at once.
func (c *doqConn) confirmed(ctx context.Context) error {
	_, err := c.NextConnection(ctx)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("QUIC handshake not finished: %w", ctx.Err())
	}
	return err
}

// doqDial is a dial in progress; err is set before done is closed.
type doqDial struct {
	done chan struct{}
	err  error
}

// NewDoQ makes a DoQ client for ep. roots is the trust for the upstream's
// certificate (nil: the system roots; see LoadRoots); the certificate must
// carry ep.TLSName. logger may be nil.
func NewDoQ(ep Endpoint, roots *x509.CertPool, logger *zap.Logger) *DoQ {
	if logger == nil {
		logger = zap.NewNop()
	}
	life, stop := context.WithCancelCause(context.Background())
	tlsConf := transportTLS(ep, roots, doqALPN)
	tlsConf.MinVersion = tls.VersionTLS13 // QUIC is TLS 1.3 only (RFC 9001 §4.2)
	return &DoQ{
		name:    ep.Redacted(),
		addr:    ep.Addr.String(),
		tlsConf: tlsConf,
		qconf: &quic.Config{
			HandshakeIdleTimeout: transportDialTimeout,
			MaxIdleTimeout:       doqIdleTimeout,
			KeepAlivePeriod:      doqPingAfter,
			// The server opens no streams towards us (RFC 9250 §4.2).
			MaxIncomingStreams:    -1,
			MaxIncomingUniStreams: -1,
		},
		log:  logger.Named("doq").With(zap.String("upstream", ep.Redacted())),
		life: life,
		stop: stop,
	}
}

// Dials is how many connections this client dialed, by outcome, with the
// outcome of the dials that sent 0-RTT.
func (d *DoQ) Dials() Dials {
	n := d.dials.load()
	n.ZeroRTTAccepted, n.ZeroRTTRejected = d.zeroRTT.accepted.Load(), d.zeroRTT.rejected.Load()
	return n
}

// zeroRTTCounts counts the dials that sent 0-RTT, by whether the server
// accepted it.
type zeroRTTCounts struct{ accepted, rejected atomic.Uint64 }

// doqReplayable reports whether a query may travel in 0-RTT, where an
// attacker can replay it: RFC 9250 §4.5 allows only transactions with
// OPCODE QUERY or NOTIFY. nxdns sends NOTIFY to no one, so only QUERY.
func doqReplayable(m *dns.Msg) bool { return m.Opcode == dns.OpcodeQuery }

// Exchange sends m on a new stream and returns the validated response with
// m's ID restored. Failures are *AttemptError.
func (d *DoQ) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	wire, err := packQUIC(m) // RFC 9250 §5.4: pad as RFC 8467 says; §4.6: 65535
	if err != nil {
		// The handler parsed this query: failing to pack it is our bug.
		return nil, &AttemptError{Upstream: d.name, Kind: KindNoResources, Err: fmt.Errorf("pack query: %w", err)}
	}
	// RFC 9250 §4.2.1: the Message ID is 0 on the wire; the stream, not the
	// ID, pairs a response with its query.
	wire[0], wire[1] = 0, 0
	early := doqReplayable(m)
	resp, err := d.exchange(ctx, wire, early)
	if err != nil && doqCollateral(err) && ctx.Err() == nil && d.life.Err() == nil {
		// The connection ended under this exchange for a reason that says
		// nothing about it: retry once on a fresh connection, unrecorded
		// (docs/upstream-pool.md "DNS over QUIC (DoQ)").
		d.recoveries.Add(1)
		resp, err = d.exchange(ctx, wire, early)
	}
	if err != nil {
		return nil, d.error(ctx, err)
	}
	resp.Id = m.Id
	if err := ValidateStream(m, resp); err != nil {
		return nil, d.error(ctx, err)
	}
	return resp, nil
}

// exchange runs one query on the live connection, dialing one if needed.
// early says the query may go in 0-RTT; otherwise it waits for the
// handshake to complete (RFC 9250 §4.5).
func (d *DoQ) exchange(ctx context.Context, wire []byte, early bool) (*dns.Msg, error) {
	c, dialed, err := d.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer d.release(c)
	select {
	case <-c.HandshakeComplete():
	default:
		// Still in 0-RTT. Only the queries that waited for this dial go
		// early: they open their streams as it returns, before the
		// server's first flight can be back, while one arriving later
		// could meet that flight in quic-go's race (see dial) and costs
		// at most the rest of one round trip by waiting.
		if !early || !dialed {
			if err := c.confirmed(ctx); err != nil {
				return nil, err
			}
		}
	}
	resp, err := d.roundTrip(ctx, c, wire)
	if errors.Is(err, quic.Err0RTTRejected) {
		// The server rejected the 0-RTT this query went in, and so processed
		// none of it (RFC 9001 §4.6.2): sending it again once, in 1-RTT on
		// the same connection, cannot get it answered twice. The wait for
		// the handshake is the query's own deadline.
		if err := c.confirmed(ctx); err != nil {
			return nil, err
		}
		d.resent.Add(1)
		resp, err = d.roundTrip(ctx, c, wire)
	}
	if ae, ok := errors.AsType[*AttemptError](err); ok && errors.Is(ae.Err, errDoQFraming) {
		// A broken frame or a nonzero ID is a DoQ protocol error (RFC 9250
		// §4.3.3): abort the connection; the next exchange dials anew. An
		// answer that is merely not DNS fails its own exchange only.
		c.CloseWithError(DoQProtocolError, "")
	}
	if err != nil && doqCollateral(err) {
		// The connection has ended, but quic-go may end its context just
		// after failing the streams: forget it now, so the retry dials
		// instead of finding it again.
		d.mu.Lock()
		if d.cur == c {
			d.cur = nil
		}
		d.mu.Unlock()
	}
	return resp, err
}

// errDoQFraming marks, inside an *AttemptError's Err (which Unwrap does
// not reach), the failures that break RFC 9250's framing.
var errDoQFraming = errors.New("DoQ framing")

// doqCollateral reports whether err is the end of a connection that another
// exchange's protocol error aborted, or that the server closed cleanly
// (DOQ_NO_ERROR, an idle close racing our reuse): neither is evidence about
// this exchange.
func doqCollateral(err error) bool {
	var ae *quic.ApplicationError
	if !errors.As(err, &ae) {
		return false
	}
	return !ae.Remote && ae.ErrorCode == DoQProtocolError || ae.Remote && ae.ErrorCode == DoQNoError
}

// ReuseRecoveries is how many exchanges were retried on a fresh connection
// because theirs ended under them for a reason not theirs
// (nxdns_upstream_reuse_recoveries_total).
func (d *DoQ) ReuseRecoveries() uint64 { return d.recoveries.Load() }

// roundTrip runs one query on its own stream: the query with its 2-octet
// length and a FIN, then one length-prefixed response (RFC 9250 §4.2). The
// stream is bounded by ctx: when ctx ends first both directions are reset
// with DOQ_REQUEST_CANCELLED (RFC 9250 §4.5), which also unblocks the read.
func (d *DoQ) roundTrip(ctx context.Context, c *doqConn, wire []byte) (*dns.Msg, error) {
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		s.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() {
		s.CancelWrite(DoQRequestCancelled)
		s.CancelRead(DoQRequestCancelled)
	})
	defer stop()
	msg := make([]byte, 2+len(wire))
	binary.BigEndian.PutUint16(msg, uint16(len(wire)))
	copy(msg[2:], wire)
	if _, err := s.Write(msg); err != nil {
		return nil, err
	}
	if err := s.Close(); err != nil { // FIN: the client sends nothing more on this stream
		return nil, err
	}
	var n [2]byte
	if _, err := io.ReadFull(s, n[:]); err != nil {
		return nil, doqReadError("length", err)
	}
	body := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(s, body); err != nil {
		return nil, doqReadError("response", err)
	}
	// One response per stream; whatever follows it is not ours to read.
	// quic-go sends STOP_SENDING with DOQ_NO_ERROR unless the FIN was
	// already read, which frees the stream without waiting for it. Reading
	// the FIN instead measured no different per miss (docs/performance.md
	// "DoQ beside DoT").
	s.CancelRead(DoQNoError)
	resp, err := Unpack(body)
	if err != nil {
		return nil, err
	}
	if resp.Id != 0 {
		return nil, &AttemptError{Kind: KindResponseMismatch, Err: fmt.Errorf("id %d, want 0 (RFC 9250 §4.2.1): %w", resp.Id, errDoQFraming)}
	}
	return resp, nil
}

// doqReadError is a failed read of a response: a stream that ended before a
// whole message is a framing error of the server's (KindBadResponse); any
// other error (a reset, a closed connection, a deadline) goes to KindOf.
func doqReadError(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("stream ended inside the %s: %w", what, errDoQFraming)}
	}
	var se *quic.StreamError
	if errors.As(err, &se) && se.Remote {
		return fmt.Errorf("server reset the stream with %s: %w", doqCodeName(uint64(se.ErrorCode)), err)
	}
	var ae *quic.ApplicationError
	if errors.As(err, &ae) && ae.Remote {
		return fmt.Errorf("server closed the connection with %s: %w", doqCodeName(uint64(ae.ErrorCode)), err)
	}
	return err
}

// acquire returns the live connection, dialing one if there is none; every
// exchange waiting for the same dial shares it. The wait is bounded by ctx,
// the dial itself by transportDialTimeout and Close, so a query whose budget
// ends mid-handshake returns at its deadline and the handshake still serves
// the next query. dialed says the exchange waited for the dial that made
// the connection.
func (d *DoQ) acquire(ctx context.Context) (c *doqConn, dialed bool, err error) {
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return nil, false, errClientClosed
		}
		if c := d.cur; c != nil && c.Context().Err() == nil {
			c.inflight++
			if c.idle != nil {
				c.idle.Stop()
			}
			d.mu.Unlock()
			return c, dialed, nil
		}
		d.cur = nil
		if d.dialing == nil {
			d.dialing = &doqDial{done: make(chan struct{})}
			go d.dial(d.dialing)
		}
		dl := d.dialing
		d.mu.Unlock()
		select {
		case <-dl.done:
			if dl.err != nil {
				return nil, false, dl.err
			}
			dialed = true
		case <-ctx.Done():
			// Said in the error so the backoff log reads as what it most
			// likely is: a path that drops UDP to the upstream
			// (docs/how-to/troubleshoot.md).
			return nil, false, fmt.Errorf("QUIC handshake with %s not finished: %w", d.addr, ctx.Err())
		}
	}
}

// dial makes a new connection and publishes it for acquire.
func (d *DoQ) dial(dl *doqDial) {
	ctx, cancel := context.WithTimeout(d.life, transportDialTimeout)
	defer cancel()
	// DialAddrEarly returns once 0-RTT keys are installed, which needs a
	// session ticket that allows early data (the tls.Config's bounded
	// session cache keeps it); without one it returns after the handshake,
	// as DialAddr does.
	//
	// Known: quic-go v0.65.0 reads the peer's transport parameters when a
	// stream opens and writes them when the server's first flight arrives,
	// without synchronisation, so a stream opened on an early connection at
	// that instant is a data race (docs/decisions/quic-library.md, the costs
	// of the choice): a pointer to parameters set before it is published,
	// and a bool. exchange keeps
	// clear of the instant by letting only the queries that waited for
	// the dial go early, as it returns, at least a round trip before the
	// server's flight; on loopback a round trip is too short for that, so
	// the 0-RTT tests run across an emulated path.
	qc, err := quic.DialAddrEarly(ctx, d.addr, d.tlsConf, d.qconf)
	early := false
	if err == nil {
		select {
		case <-qc.HandshakeComplete():
			err = doqCheckALPN(qc)
		default:
			early = true // settle checks it once the handshake completes
		}
	}
	if err != nil && d.life.Err() != nil {
		err = errClientClosed
	}
	if err != nil && ctx.Err() != nil && d.life.Err() == nil {
		// Our dial cap fired, not the caller's budget: the upstream's own
		// slowness (KindPeerTimeout), whatever error quic-go wrapped it in.
		err = fmt.Errorf("handshake not done within %v: %w", transportDialTimeout, KindPeerTimeout)
	}
	if !early {
		resumed := err == nil && qc.ConnectionState().TLS.DidResume
		d.dials.record(err, resumed)
		if err == nil {
			d.log.Debug("connected", zap.Bool("resumed", resumed))
		}
	}
	d.mu.Lock()
	d.dialing = nil
	switch {
	case err != nil:
	case d.closed:
		qc.CloseWithError(DoQNoError, "")
		err = errClientClosed
	default:
		d.cur = &doqConn{Conn: qc}
		if early {
			go d.settle(qc)
		}
	}
	dl.err = err
	d.mu.Unlock()
	close(dl.done)
}

// doqCheckALPN fails a connection whose server did not negotiate doq.
func doqCheckALPN(qc *quic.Conn) error {
	if p := qc.ConnectionState().TLS.NegotiatedProtocol; p != doqALPN {
		qc.CloseWithError(DoQProtocolError, "")
		return fmt.Errorf("upstream negotiated %q, not %s: %w", p, doqALPN, KindNetwork)
	}
	return nil
}

// settle follows a connection that started in 0-RTT to the end of its
// handshake, and counts the dial then: accepted or rejected 0-RTT, or failed.
// The queries need not wait for it: a rejected one sees Err0RTTRejected.
// The server's answers are 1-RTT data, which the client reads only after
// it has verified the certificate, so no answer is taken from an
// unverified server.
func (d *DoQ) settle(qc *quic.Conn) {
	select {
	case <-qc.HandshakeComplete():
	case <-qc.Context().Done():
		err := context.Cause(qc.Context())
		if d.life.Err() != nil {
			err = errClientClosed // Close ended it: counted in no outcome
		}
		d.dials.record(err, false)
		return
	}
	cs := qc.ConnectionState()
	if cs.Used0RTT {
		d.zeroRTT.accepted.Add(1)
	} else {
		// With 0-RTT rejected, so may the application protocol be
		// (RFC 9001 §4.6.2): checked again.
		d.zeroRTT.rejected.Add(1)
	}
	err := doqCheckALPN(qc)
	d.dials.record(err, cs.TLS.DidResume)
	d.log.Debug("connected", zap.Bool("resumed", cs.TLS.DidResume), zap.Bool("0rtt_accepted", cs.Used0RTT), zap.Error(err))
}

// release ends one exchange on c and starts c's idle timer when it was the
// last.
func (d *DoQ) release(c *doqConn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c.inflight--
	if c.inflight > 0 {
		return
	}
	if c.idle == nil {
		c.idle = time.AfterFunc(transportIdleTimeout, func() { d.closeIdle(c) })
	} else {
		c.idle.Reset(transportIdleTimeout)
	}
}

// closeIdle closes c if no exchange took it since its timer started.
func (d *DoQ) closeIdle(c *doqConn) {
	d.mu.Lock()
	if c.inflight > 0 {
		d.mu.Unlock()
		return
	}
	if d.cur == c {
		d.cur = nil
	}
	d.mu.Unlock()
	c.CloseWithError(DoQNoError, "")
}

// error classifies err; once Close has run, every failure is the
// cancellation it caused, not evidence about the upstream.
func (d *DoQ) error(ctx context.Context, err error) *AttemptError {
	if d.life.Err() != nil {
		err = errClientClosed
	}
	return transportError(ctx, d.name, err)
}

// Close closes the connection with DOQ_NO_ERROR and ends the dial in
// progress; exchanges still running fail as cancelled.
func (d *DoQ) Close() error {
	d.stop(errClientClosed)
	d.mu.Lock()
	d.closed = true
	c := d.cur
	d.cur = nil
	if c != nil && c.idle != nil {
		c.idle.Stop()
	}
	d.mu.Unlock()
	if c != nil {
		c.CloseWithError(DoQNoError, "")
	}
	return nil
}
