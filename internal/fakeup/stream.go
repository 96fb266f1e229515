package fakeup

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// maxPipelined bounds the answers in flight on one connection. Past it the
// reader stops reading until one is written, so a client pipelining without
// limit meets TCP back-pressure instead of an unbounded goroutine count.
const maxPipelined = 256

// session serves one TCP or DoT connection with RFC 7766 §6.2.1.1
// pipelining: one reader takes queries off the connection as they arrive,
// each answer waits its own latency on its own goroutine, and a single writer
// lock keeps replies whole, so answers leave in the order their latencies
// end, not the order the queries came.
//
// Guarantee: every goroutine the session starts has ended when serve
// returns, and the connection is closed.
type session struct {
	l      *listener
	conn   net.Conn
	ctx    context.Context // cancelled when the connection is done for
	cancel context.CancelFunc
	slots  chan struct{} // one per answer in flight
	wg     sync.WaitGroup

	wmu sync.Mutex // serialises replies on the connection

	mu      sync.Mutex // guards pending and the read deadline it decides
	pending int        // answers scheduled and not yet written or abandoned
}

// errCloseOnQuery ends a session at its close_on_query-th query.
var errCloseOnQuery = errors.New("close_on_query reached")

// serveStream runs a session on conn until the client leaves, a read or
// write fails, idle_close fires, close_on_query is reached, or the server
// closes.
func (l *listener) serveStream(conn net.Conn) {
	ctx, cancel := context.WithCancel(l.s.ctx)
	ss := &session{l: l, conn: conn, ctx: ctx, cancel: cancel, slots: make(chan struct{}, maxPipelined)}
	err := ss.readLoop()
	if errors.Is(err, io.EOF) || errors.Is(err, errCloseOnQuery) {
		// The client finished sending (perhaps a half-close after its last
		// query), or close_on_query stopped reading: either way it is still
		// owed the answers in flight.
		ss.wg.Wait()
	}
	cancel()
	ss.wg.Wait()
	conn.Close()
}

func (ss *session) readLoop() error {
	b := ss.l.Behaviour
	ss.settle(0)
	for n := 1; ; n++ {
		buf, err := ss.readMsg()
		if err != nil {
			return err
		}
		ss.l.counters.queries.Add(1)
		if n == b.CloseOnQuery {
			// As an upstream closing a connection it considers idle just as
			// a query arrives: this query is read and never answered, and
			// nothing more is read; earlier queries still get their answers.
			return errCloseOnQuery
		}
		q, reply := decode(buf, b, ss.l.s.cfg.TTL, false)
		switch {
		case reply == nil:
			ss.settle(0)
			continue
		case b.Stall:
			ss.l.counters.stalled.Add(1)
			ss.settle(0)
			continue
		}
		select {
		case ss.slots <- struct{}{}:
		case <-ss.ctx.Done():
			return ss.ctx.Err()
		}
		ss.settle(+1)
		d := ss.l.delay(q)
		ss.wg.Go(func() {
			defer func() { <-ss.slots }()
			defer ss.settle(-1)
			if sleep(ss.ctx, d) {
				ss.write(reply)
			}
		})
	}
}

// readMsg reads one length-prefixed message (RFC 1035 §4.2.2). A timeout
// here is idle_close firing: settle clears the deadline while answers are
// owed, so a connection is idle only when it has nothing to say either.
func (ss *session) readMsg() ([]byte, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(ss.conn, hdr[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(ss.conn, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // a torn message is not a clean end
		}
		return nil, err
	}
	return buf, nil
}

// settle adjusts the count of answers owed and re-arms idle_close to match:
// no read deadline while any answer is owed, now+idle_close once none is.
// Only the reader adds to pending, and only between reads, so a deadline
// cannot fire on a read that began while an answer was owed.
func (ss *session) settle(delta int) {
	idle := ss.l.Behaviour.IdleClose
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.pending += delta
	if idle <= 0 {
		return
	}
	if ss.pending == 0 {
		ss.conn.SetReadDeadline(time.Now().Add(idle))
	} else {
		ss.conn.SetReadDeadline(time.Time{})
	}
}

// write sends one reply under the writer lock. A failed write leaves the
// framing untrustworthy, so it ends the session: closing the connection
// wakes the reader.
func (ss *session) write(m *dns.Msg) {
	msg, err := m.Pack()
	if err != nil {
		return // our own message: cannot happen for what respond builds
	}
	out := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(out, uint16(len(msg)))
	copy(out[2:], msg)
	ss.wmu.Lock()
	ss.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	_, err = ss.conn.Write(out)
	ss.wmu.Unlock()
	if err != nil {
		ss.cancel()
		ss.conn.Close()
		return
	}
	ss.l.counters.answered.Add(1)
}
