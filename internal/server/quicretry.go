package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/query"
)

// Address validation under load on the QUIC listeners (DoQ and DoH3;
// docs/server.md "Retry under load"). Before a client's address is
// validated a QUIC server may send it at most three times the bytes it
// received (RFC 9000 §8.1, quic-go enforces it), so a spoofed Initial can
// make nxdns send a few kilobytes to a victim, and each one costs a TLS
// handshake's state until it times out. A Retry (RFC 9000 §8.1.2) answers
// an Initial with a token and no state at all; only a client that really
// receives at its address can come back with it. It costs a genuine client
// one round trip, so nxdns asks for it only while quicRetryAt
// handshakes or more are in progress on one front (every DoQ or
// every DoH3 listener together): a household's devices never get near
// that, a spoofed flood passes it at once.
const quicRetryAt = 32

// quicHandshakes counts one front's handshakes in progress: from quic-go
// creating the connection (ConnContext) to its handshake completing (its
// Accept) or the connection ending, whichever comes first.
type quicHandshakes struct {
	n         atomic.Int64
	threshold atomic.Int64  // 0 means quicRetryAt; tests lower it
	retries   atomic.Uint64 // Initials answered with a Retry
	validated atomic.Uint64 // connections created for a client that came back with its Retry token
	// Connections that ended before their handshake completed, as DoT's
	// frontCounters count them (nxdns_tls_handshake_failures_total):
	// quic-go's handshake timer, or any other end (a TLS alert such as a
	// client rejecting the certificate, no common ALPN, a protocol
	// violation). A listener closing under a handshake is neither.
	timeouts atomic.Uint64
	failures atomic.Uint64
}

type handshakeKey struct{}

// begin is the transport's ConnContext: one more handshake in progress,
// ended by done or by the connection's end.
func (h *quicHandshakes) begin(ctx context.Context, info *quic.ClientInfo) (context.Context, error) {
	if info.AddrVerified {
		h.validated.Add(1)
	}
	h.n.Add(1)
	var once sync.Once
	end := func(completed bool) {
		once.Do(func() {
			h.n.Add(-1)
			if !completed {
				h.failed(context.Cause(ctx))
			}
		})
	}
	context.AfterFunc(ctx, func() { end(false) })
	return context.WithValue(ctx, handshakeKey{}, func() { end(true) }), nil
}

// failed counts a connection that ended, with cause, before its handshake
// completed.
func (h *quicHandshakes) failed(cause error) {
	var hs *quic.HandshakeTimeoutError
	var idle *quic.IdleTimeoutError
	switch {
	case errors.Is(cause, quic.ErrServerClosed), errors.Is(cause, quic.ErrTransportClosed):
		// the listener's own end: it cut the handshake
	case errors.As(cause, &hs), errors.As(cause, &idle):
		h.timeouts.Add(1)
	default:
		h.failures.Add(1)
	}
}

// done ends the handshake of the connection whose context is ctx.
func (h *quicHandshakes) done(ctx context.Context) {
	if end, ok := ctx.Value(handshakeKey{}).(func()); ok {
		end()
	}
}

// over reports whether the threshold's number of handshakes, or more, are
// in progress.
func (h *quicHandshakes) over() bool {
	t := h.threshold.Load()
	if t == 0 {
		t = quicRetryAt
	}
	return h.n.Load() >= t
}

// quicValidate is the transport's VerifySourceAddress, asked for an Initial
// without a valid token: a Retry while d is over its threshold. A client
// outside dns.allow gets none: quicAdmit refuses it next, statelessly too,
// and a Retry would only invite it back.
func (s *Server) quicValidate(d *doqFront, a net.Addr) bool {
	if !d.handshakes.over() || !s.allowedNow(query.ClientOfRemote(a.String())) {
		return false
	}
	d.handshakes.retries.Add(1)
	return true
}
