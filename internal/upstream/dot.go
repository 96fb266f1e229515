package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
)

// DoTMaxConns is how many connections one DoT upstream keeps open for new
// exchanges. One connection carries every in-flight exchange (pipelining),
// so the burst of SPEC §1 needs one; a few more spread a burst when a server
// works through one connection's queries in order, while keeping the sockets
// (and the server's per-client budget) per upstream small. A connection
// retired as unresponsive does not count: it only drains its last exchanges.
// A stale retry may dial one past the cap (see pick).
const DoTMaxConns = 3

// dotConnBusy is the number of in-flight exchanges on the least-loaded
// connection beyond which a new connection is dialed (up to DoTMaxConns).
// Below it, pipelining on a warm connection is cheaper than a handshake.
const dotConnBusy = 16

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

	life       context.Context // ends in-progress dials on Close
	stop       context.CancelCauseFunc
	wg         sync.WaitGroup // dials, readers and writers
	seq        atomic.Uint64  // connections created so far
	recoveries atomic.Uint64  // exchanges saved by a stale retry (SPEC §5)

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
		life:        life,
		stop:        stop,
	}
}

// ReuseRecoveries is the number of exchanges that failed on a reused
// connection the upstream had closed and succeeded on a fresh one (SPEC §5,
// nxdns_upstream_reuse_recoveries_total). Those failures were never returned.
func (d *DoT) ReuseRecoveries() uint64 { return d.recoveries.Load() }

// dotFailure is one failed try and what the stale rule needs to know about it.
type dotFailure struct {
	err     error
	reused  bool   // the connection was up before this exchange picked it
	started bool   // a byte of the response may have arrived
	failSeq uint64 // connections newer than this are fresh for a retry
}

// Exchange sends m and returns the validated response with m's ID. A stale
// reused connection is retried once on a fresh one (SPEC §5); every other
// failure is an *AttemptError.
func (d *DoT) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	wire, err := m.Pack()
	if err != nil {
		// The handler parsed this query: failing to pack it is our bug, which
		// blames no upstream.
		return nil, &AttemptError{Upstream: d.name, Kind: KindNoResources, Err: fmt.Errorf("pack query: %w", err)}
	}
	resp, f := d.try(ctx, m, wire, 0)
	if f != nil && staleRetry(f.reused, f.started, f.err) && ctx.Err() == nil {
		var retry *dotFailure
		if resp, retry = d.try(ctx, m, wire, f.failSeq+1); retry == nil {
			d.recoveries.Add(1)
			d.log.Debug("recovered from a connection the upstream had closed", zap.Error(f.err))
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
	c, reused, err := d.conn(ctx, minSeq)
	if err != nil {
		return nil, &dotFailure{err: err}
	}
	defer c.release()
	ch, frames, err := c.send(wire)
	if err != nil {
		return nil, &dotFailure{err: err, reused: reused, failSeq: c.failSeqNow()}
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, &dotFailure{err: r.err, reused: reused, started: r.started, failSeq: c.failSeqNow()}
		}
		resp, err := dotDecode(m, r.wire)
		if err != nil {
			// A response that fails validation means the framing or the
			// upstream cannot be trusted: end the connection (SPEC §5).
			c.fail(fmt.Errorf("connection closed after a bad response: %w", err), false)
			return nil, &dotFailure{err: err}
		}
		return resp, nil
	case <-ctx.Done():
		// Leave quietly: the query keeps its ID until the late response
		// arrives, and the other exchanges on the connection carry on.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			c.retireIfSilent(frames) // a client that left says nothing about the path
		}
		return nil, &dotFailure{err: ctx.Err()}
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

// pick chooses and reserves the connection for one exchange: the least
// loaded one at least as new as minSeq, or a new one when none exists or all
// are busy and there is room, or when a stale retry finds none newer than
// its failure (even at the cap). It returns nil if the chosen connection
// ended in the meantime.
func (d *DoT) pick(ctx context.Context, minSeq uint64) (*dotConn, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, false, errClientClosed
	}
	live := d.conns[:0]
	open := 0 // connections that take new exchanges; retired ones only drain
	for _, c := range d.conns {
		if c.ended() {
			continue
		}
		live = append(live, c) // retired ones stay until they end, so Close reaches them
		if _, ok := c.load(); ok {
			open++
		}
	}
	clear(d.conns[len(live):])
	d.conns = live
	best, load := d.leastLoadedLocked(minSeq)
	switch {
	case best != nil && (load < dotConnBusy || open >= DoTMaxConns):
	case open < DoTMaxConns || minSeq > 0:
		// A stale retry (minSeq > 0) dials past the cap rather than reuse a
		// connection older than its failure: SPEC §5 promises it a fresh one.
		// The upstream that closed one connection may have closed the others
		// in the same sweep (an idle timeout, a restart), and a second stale
		// failure is final, recorded against a healthy upstream; failing the
		// retry at once would record it too. The excess is bounded: it happens
		// only while the cap is full of connections older than the failure,
		// and the new connection, being the newest, takes every other retry
		// of the same failure and counts against the cap for every exchange.
		best = d.dialLocked(ctx)
	}
	if best == nil {
		return nil, false, nil // every connection ended since the prune
	}
	reused, ok := best.reserve()
	if !ok {
		return nil, false, nil
	}
	return best, reused, nil
}

func (d *DoT) leastLoadedLocked(minSeq uint64) (*dotConn, int) {
	var best *dotConn
	bestLoad := math.MaxInt
	for _, c := range d.conns {
		if load, ok := c.load(); ok && c.seq >= minSeq && load < bestLoad {
			best, bestLoad = c, load
		}
	}
	return best, bestLoad
}

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
		tc, err := transportDial(dctx, d.addr, d.tlsConf, nil)
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

// start records a dial's outcome and starts a live connection's reader and
// writer, unless Close came first.
func (d *DoT) start(c *dotConn, tc *tls.Conn, err error, aborted bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil && d.closed {
		c.fail(errClientClosed, false) // established then closes tc
	}
	if c.established(tc, err, aborted) {
		d.log.Debug("connected", zap.Bool("resumed", tc.ConnectionState().DidResume))
		d.wg.Go(c.readLoop) // under d.mu and not closed: Close has not begun Wait
		d.wg.Go(c.writeLoop)
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
