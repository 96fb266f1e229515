package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
)

// DoTMaxConns is how many connections one DoT upstream keeps open for new
// exchanges. One connection carries every in-flight exchange (pipelining, up
// to dotMaxInFlight), so the burst of docs/design.md#burst-staircase needs one; the others are dialed
// ahead of need (dotDialAhead) so that a server working through one
// connection's queries in order sees the load spread, and a connection lost
// mid-burst has a warm successor, while the sockets (and the server's
// per-client budget) per upstream stay few. A connection retired as
// unresponsive or full does not count: it only drains its last exchanges. A
// stale or collateral retry may dial one past the cap (see pick).
const DoTMaxConns = 3

// dotMaxInFlight is the pipelining depth: how many exchanges one established
// connection carries before a query would rather wait for another. 64 is
// twice what the pool can send one upstream at once (DefaultSlots, 32, plus
// the one probe), so a household burst — 30 names, or hundreds arriving
// together, which the pool admits at most 32 at a time per upstream — always
// shares a warm connection and never waits for a handshake (docs/design.md#lesson-round-trips,
// docs/design.md#dot-client), with room to spare for retries. Servers pipeline far deeper than that: unbound and knot-resolver read every frame a connection
// delivers and answer out of order (RFC 7766 §6.2.1.1).
const dotMaxInFlight = 64

// dotDialAhead is the load on the least-loaded established connection at
// which the next connection is dialed in the background (up to DoTMaxConns).
// No exchange waits for that dial: they keep pipelining on the established
// connection, and the new one takes new exchanges once its handshake is done.
// Half a burst: a steady trickle of queries stays on one connection.
const dotDialAhead = 16

// errDialerDeadline is the cause of a shared dial ended by the deadline of
// the exchange that started it. Exchanges that joined that dial with more
// time left dial again rather than inherit someone else's timeout.
var errDialerDeadline = errors.New("the exchange that started this dial ran out of time")

// DoT is a DNS-over-TLS client (RFC 7858) for one upstream. Connections are
// reused and pipelined (RFC 7766 §6.2.1.1), at most DoTMaxConns of them, each
// closed after transportIdleTimeout without use. Exchange is safe for
// concurrent use.
type DoT struct {
	name        string // redacted URL, for errors and logs
	addr        string // IP:port, never resolved
	tlsConf     *tls.Config
	log         *zap.Logger
	idleTimeout time.Duration // transportIdleTimeout; tests shorten it
	maxPending  int           // dotMaxPending; tests shorten it

	life       context.Context // ends in-progress dials on Close
	stop       context.CancelCauseFunc
	wg         sync.WaitGroup // dials and readers
	seq        atomic.Uint64  // connections created so far
	recoveries atomic.Uint64  // exchanges saved by a stale retry (docs/design.md#stale-connection)
	dials      dialCounts     // nxdns_upstream_connections_total

	mu     sync.Mutex // guards the fields below
	conns  []*dotConn // dialing or up; ended ones are pruned on the next pick
	closed bool
}

var _ Client = (*DoT)(nil)

// NewDoT makes a DoT client for ep. roots is the trust for the upstream's
// certificate (nil: the system roots; see LoadRoots); the certificate must
// carry ep.TLSName. logger may be nil.
func NewDoT(ep Endpoint, roots *x509.CertPool, logger *zap.Logger) *DoT {
	if logger == nil {
		logger = zap.NewNop()
	}
	life, stop := context.WithCancelCause(context.Background())
	return &DoT{
		name:        ep.Redacted(),
		addr:        ep.Addr.String(),
		tlsConf:     transportTLS(ep, roots),
		log:         logger.Named("dot").With(zap.String("upstream", ep.Redacted())),
		idleTimeout: transportIdleTimeout,
		maxPending:  dotMaxPending,
		life:        life,
		stop:        stop,
	}
}

// ReuseRecoveries is the number of exchanges that failed on a reused
// connection the upstream had closed and succeeded on a fresh one (docs/design.md#stale-connection,
// nxdns_upstream_reuse_recoveries_total). Those failures were never returned.
func (d *DoT) ReuseRecoveries() uint64 { return d.recoveries.Load() }

// Dials is how many connections this client dialed, by outcome.
func (d *DoT) Dials() Dials { return d.dials.load() }

// dotFailure is one failed try and what the stale rule needs to know about it.
type dotFailure struct {
	err        error
	reused     bool   // the connection was up before this exchange picked it
	started    bool   // a byte of the response may have arrived
	collateral bool   // another exchange's bad frame ended the connection (docs/design.md#pool-classification)
	failSeq    uint64 // connections newer than this are fresh for a retry
}

// retry reports whether the failure earns one more try on a fresh
// connection: a stale reused connection (docs/design.md#stale-connection), or collateral damage of
// another exchange's bad frame (docs/design.md#pool-classification: evidence is counted once per
// fault, and this exchange never received a response).
func (f *dotFailure) retry() bool {
	return f.collateral || staleRetry(f.reused, f.started, f.err)
}

// Exchange sends m and returns the validated response with m's ID. A stale
// reused connection is retried once on a fresh one (docs/design.md#stale-connection); every other
// failure is an *AttemptError.
func (d *DoT) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	wire, err := packPadded(m)
	if err != nil {
		// The handler parsed this query: failing to pack it is our bug, which
		// blames no upstream.
		return nil, &AttemptError{Upstream: d.name, Kind: KindNoResources, Err: fmt.Errorf("pack query: %w", err)}
	}
	resp, f := d.try(ctx, m, wire, 0)
	if f != nil && f.retry() && ctx.Err() == nil {
		// A retry that fails is final and classified on its own: it ran on a
		// fresh connection, so its failure is evidence of its own (a second
		// bad frame in a row included).
		var retry *dotFailure
		if resp, retry = d.try(ctx, m, wire, f.failSeq+1); retry == nil {
			if f.collateral {
				d.log.Debug("retried after another query's bad response closed the connection", zap.Error(f.err))
			} else {
				d.recoveries.Add(1)
				d.log.Debug("recovered from a connection the upstream had closed", zap.Error(f.err))
			}
			return resp, nil
		}
		f = retry
	}
	if f != nil {
		return nil, transportError(ctx, d.name, f.err)
	}
	return resp, nil
}

// try runs one exchange on one connection, at least as new as minSeq.
func (d *DoT) try(ctx context.Context, m *dns.Msg, wire []byte, minSeq uint64) (*dns.Msg, *dotFailure) {
	c, reused, ch, frames, f := d.sendOn(ctx, wire, minSeq)
	if f != nil {
		return nil, f
	}
	defer c.release()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, &dotFailure{err: r.err, reused: reused, started: r.started, collateral: r.collateral, failSeq: c.failSeqNow()}
		}
		resp, err := dotDecode(m, r.wire)
		if err != nil {
			// A response that fails validation means the framing or the
			// upstream cannot be trusted: end the connection (docs/design.md#dot-client). The
			// fault is this exchange's; the others on it are collateral.
			c.failFrame(fmt.Errorf("connection closed after a bad response to another query: %w", err), false)
			return nil, &dotFailure{err: err}
		}
		return resp, nil
	case <-ctx.Done():
		// Leave quietly: the query keeps its ID until the late response
		// arrives, and the other exchanges on the connection carry on. Only
		// a full attempt that heard nothing suggests a dead path; a query
		// whose own budget ran out, or whose client left, says nothing about
		// the connection (docs/design.md#pool-classification: a truncated expiry never retires one).
		if errors.Is(context.Cause(ctx), KindAttemptExpired) {
			c.retireIfSilent(frames)
		}
		return nil, &dotFailure{err: ctx.Err()}
	}
}

// sendOn queues wire on a connection at least as new as minSeq, which the
// caller releases. A connection whose table of pending IDs is full has just
// been retired (it takes nothing new, its exchanges carry on), and the
// query moves to another.
func (d *DoT) sendOn(ctx context.Context, wire []byte, minSeq uint64) (*dotConn, bool, <-chan dotReply, uint64, *dotFailure) {
	for {
		c, reused, err := d.conn(ctx, minSeq)
		if err != nil {
			return nil, false, nil, 0, &dotFailure{err: err}
		}
		ch, frames, err := c.send(wire, d.maxPending)
		if err == nil {
			return c, reused, ch, frames, nil
		}
		c.release()
		if !errors.Is(err, errDoTFull) {
			return nil, false, nil, 0, &dotFailure{err: err, reused: reused, failSeq: c.failSeqNow()}
		}
	}
}

// dotDecode unpacks a response matched by wire ID, restores the caller's ID
// and validates it against the question.
func dotDecode(q *dns.Msg, wire []byte) (*dns.Msg, error) {
	resp, err := Unpack(wire)
	if err != nil {
		return nil, err
	}
	resp.Id = q.Id // the wire ID was ours; matching it was the ID check
	if err := ValidateStream(q, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// conn returns a reserved connection that is up (release it when done) and
// whether it was reused. It waits for a dial in progress under ctx.
func (d *DoT) conn(ctx context.Context, minSeq uint64) (*dotConn, bool, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		c, reused, err := d.pick(ctx, minSeq)
		if err != nil {
			return nil, false, err
		}
		if c == nil {
			continue // the picked connection ended before we could reserve it
		}
		select {
		case <-c.ready:
		case <-ctx.Done():
			c.release()
			return nil, false, ctx.Err()
		}
		if c.dialErr == nil {
			return c, reused, nil
		}
		c.release()
		if !c.dialAborted || deadlinePassed(ctx) {
			return nil, false, c.dialErr
		}
		// Another exchange's deadline ended the dial we joined; ours has time.
	}
}

// pick chooses and reserves the connection for one exchange (nil if the
// chosen one ended in the meantime), at least as new as minSeq:
//
//  1. the least-loaded established connection with room (dotMaxInFlight):
//     an established connection is never passed over for a handshake;
//  2. else the least-loaded connection still dialing, with room: a cold
//     burst shares one handshake;
//  3. else a new connection, when there is room under DoTMaxConns — or past
//     the cap for a retry (minSeq > 0) that finds none newer than its
//     failure;
//  4. else the least-loaded connection, over its depth: pipelining deeper
//     beats failing.
//
// Choosing an established connection that carries dotDialAhead exchanges
// or more starts the next dial in the background (dialAheadLocked).
func (d *DoT) pick(ctx context.Context, minSeq uint64) (*dotConn, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, false, errClientClosed
	}
	up, dialing := d.pruneLocked()
	best, load := d.leastLoadedLocked(minSeq, connUp)
	if best == nil || load >= dotMaxInFlight {
		best, load = d.leastLoadedLocked(minSeq, connDialing)
	}
	switch {
	case best != nil && load < dotMaxInFlight:
	case up+dialing < DoTMaxConns || minSeq > 0:
		// A retry (minSeq > 0) dials past the cap rather than reuse a
		// connection older than its failure: docs/design.md#stale-connection promises it a fresh one.
		// The upstream that closed one connection may have closed the others
		// in the same sweep (an idle timeout, a restart), and a second stale
		// failure is final, recorded against a healthy upstream; failing the
		// retry at once would record it too. The excess is bounded: it happens
		// only while the cap is full of connections older than the failure,
		// and the new connection, being the newest, takes every other retry
		// of the same failure and counts against the cap for every exchange.
		best = d.dialLocked(ctx)
		dialing++
	default:
		best, _ = d.leastLoadedLocked(minSeq, connUp|connDialing)
	}
	if best == nil {
		return nil, false, nil // every connection ended since the prune
	}
	reused, ok := best.reserve()
	if !ok {
		return nil, false, nil
	}
	if reused && load+1 >= dotDialAhead && up+dialing < DoTMaxConns && dialing == 0 {
		d.dialAheadLocked()
	}
	return best, reused, nil
}

// pruneLocked forgets ended connections and counts the others that take new
// exchanges (retired ones only drain): established, and dialing.
func (d *DoT) pruneLocked() (up, dialing int) {
	live := d.conns[:0]
	for _, c := range d.conns {
		if c.ended() {
			continue
		}
		live = append(live, c) // retired ones stay until they end, so Close reaches them
		switch _, isUp, ok := c.load(); {
		case ok && isUp:
			up++
		case ok:
			dialing++
		}
	}
	clear(d.conns[len(live):])
	d.conns = live
	return up, dialing
}

// Connection states for leastLoadedLocked.
const (
	connUp      = 1 << iota // established
	connDialing             // handshake in progress
)

// leastLoadedLocked is the connection in one of states, at least as new as
// minSeq and taking new exchanges, with the fewest users, and that number.
func (d *DoT) leastLoadedLocked(minSeq uint64, states int) (*dotConn, int) {
	var best *dotConn
	bestLoad := math.MaxInt
	for _, c := range d.conns {
		load, up, ok := c.load()
		state := connDialing
		if up {
			state = connUp
		}
		if ok && states&state != 0 && c.seq >= minSeq && load < bestLoad {
			best, bestLoad = c, load
		}
	}
	return best, bestLoad
}

// dialAheadLocked dials a connection nobody waits for (docs/design.md#dot-client: extra
// connections are dialed ahead of need, in the background). It belongs to
// the client alone: only Close and transportDialTimeout end it, and if no
// exchange comes it closes after the idle timeout like any other.
func (d *DoT) dialAheadLocked() { d.dialLocked(context.Background()) }

// dialLocked adds a connection and starts dialing it. The dial belongs to
// the client, not to the exchange that started it: other exchanges join it,
// so it survives the starter's cancellation, but not its deadline (which is
// the pool's budget reaching the socket) nor Close.
func (d *DoT) dialLocked(ctx context.Context) *dotConn {
	c := newDoTConn(d.seq.Add(1), &d.seq, d.idleTimeout)
	d.conns = append(d.conns, c)
	dctx, cancel := context.WithCancel(d.life)
	if dl, ok := ctx.Deadline(); ok {
		dctx, cancel = context.WithDeadlineCause(d.life, dl, errDialerDeadline)
	}
	d.wg.Go(func() {
		defer cancel()
		tc, err := transportDial(dctx, d.addr, d.tlsConf, func(raw net.Conn) (net.Conn, error) {
			return newNBConn(raw, func(err error) { c.fail(err, false) })
		})
		aborted := false
		if err != nil {
			switch context.Cause(dctx) {
			case errClientClosed:
				err = errClientClosed
			case errDialerDeadline:
				aborted = true
			}
		}
		d.start(c, tc, err, aborted)
	})
	return c
}

// start records a dial's outcome and starts a live connection's reader,
// unless Close came first.
func (d *DoT) start(c *dotConn, tc *tls.Conn, err error, aborted bool) {
	d.dials.count(tc, err)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && d.closed {
		c.fail(errClientClosed, false) // established then closes tc
	}
	if c.established(tc, err, aborted) {
		d.log.Debug("connected", zap.Bool("resumed", tc.ConnectionState().DidResume))
		d.wg.Go(c.readLoop) // under d.mu and not closed: Close has not begun Wait
	}
}

// Close ends every connection and dial and waits for their goroutines.
// Exchanges still running fail as cancelled.
func (d *DoT) Close() error {
	d.mu.Lock()
	conns := d.conns
	d.conns = nil
	d.closed = true
	d.mu.Unlock()
	d.stop(errClientClosed)
	for _, c := range conns {
		c.fail(errClientClosed, false)
	}
	d.wg.Wait()
	return nil
}
