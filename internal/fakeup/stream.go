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

	"github.com/nxdns/nxdns/internal/sleep"
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

	wmu sync.Mutex // serialises replies on the connection; taken before mu

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
	l.sessions.add(ss)
	defer l.sessions.remove(ss)
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
		switch f := ss.l.takeFault(); f {
		case FaultCloseOnQuery:
			return errCloseOnQuery
		case FaultPartialLength:
			ss.writeRaw([]byte{0})
			return errCloseOnQuery
		default:
			if err := ss.schedule(buf, f); err != nil {
				return err
			}
		}
	}
}

// schedule answers one query on its own goroutine, after its delay, with
// fault f applied. A query that gets no answer is counted and dropped here.
func (ss *session) schedule(buf []byte, f Fault) error {
	b := ss.l.Behaviour
	q := new(dns.Msg)
	if err := q.Unpack(buf); err != nil {
		if r := formErr(buf); r != nil {
			return ss.owe(0, func() bool { return ss.write(r) })
		}
		ss.settle(0)
		return nil
	}
	switch {
	case q.Response: // RFC 1035 §7.3: never answer a response
		ss.settle(0)
		return nil
	case b.Stall:
		ss.l.counters.stalled.Add(1)
		ss.settle(0)
		return nil
	case b.Endless:
		return ss.owe(0, func() bool { ss.endless(q); return false })
	}
	d := ss.l.delay(q) + ss.l.hookDelay()
	return ss.owe(d, func() bool {
		r := ss.l.answer(ss.ctx, q, f)
		return r != nil && ss.write(r)
	})
}

// owe runs answer on its own goroutine after d, holding a pipelining slot
// and counting it as owed until it is written or abandoned. answer reports
// whether it wrote a reply: write stops owing it in the same critical
// section as its last byte, so owe stops owing only what was never written.
func (ss *session) owe(d time.Duration, answer func() bool) error {
	select {
	case ss.slots <- struct{}{}:
	case <-ss.ctx.Done():
		return ss.ctx.Err()
	}
	ss.settle(+1)
	ss.wg.Go(func() {
		defer func() { <-ss.slots }()
		if !sleep.For(ss.ctx, d) || !answer() {
			ss.settle(-1)
		}
	})
	return nil
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
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.settleLocked(delta)
}

// settleLocked is settle for a caller that holds ss.mu.
func (ss *session) settleLocked(delta int) {
	idle := ss.l.Behaviour.IdleClose
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

// write sends one owed reply under the writer lock (slowly with
// slow_bytes) and reports whether it did; if so, it no longer counts as
// owed. A failed write leaves the framing untrustworthy, so it ends the
// session: closing the connection wakes the reader.
func (ss *session) write(m *dns.Msg) bool {
	msg, err := m.Pack()
	if err != nil {
		return false // our own message: cannot happen for what respond builds
	}
	out := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(out, uint16(len(msg)))
	copy(out[2:], msg)
	if !ss.writeOut(out, true) {
		return false
	}
	ss.l.counters.answered.Add(1)
	return true
}

// writeRaw writes b whole under the writer lock, one byte every slow_bytes
// when that is set, and reports whether it did. b is no owed answer.
func (ss *session) writeRaw(b []byte) bool { return ss.writeOut(b, false) }

// writeOut is writeRaw, and for an owed answer (owed) it writes the last
// bytes and stops owing the answer in one critical section under ss.mu:
// closeIdle then finds every answer either still owed or written whole,
// never already with the client and still counted.
func (ss *session) writeOut(b []byte, owed bool) bool {
	ss.wmu.Lock()
	defer ss.wmu.Unlock()
	step := len(b)
	if ss.l.Behaviour.SlowBytes > 0 {
		step = 1
	}
	for len(b) > 0 {
		if step == 1 && !sleep.For(ss.ctx, ss.l.Behaviour.SlowBytes) {
			return false
		}
		k := min(step, len(b))
		if owed && k == len(b) {
			return ss.writeLast(b)
		}
		if !ss.writeChunk(b[:k]) {
			return false
		}
		b = b[k:]
	}
	return true
}

// writeLast writes an owed answer's last bytes and, if they went out,
// stops owing it, both under ss.mu.
func (ss *session) writeLast(b []byte) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if !ss.writeChunk(b) {
		return false
	}
	ss.settleLocked(-1)
	return true
}

// writeChunk writes b with the write deadline; a failure ends the session.
func (ss *session) writeChunk(b []byte) bool {
	ss.conn.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := ss.conn.Write(b); err != nil {
		ss.cancel()
		ss.conn.Close()
		return false
	}
	return true
}

// endless answers q with frames for another ID, without end, until the
// client closes or the server does: an upstream that never stops sending.
// Each frame is a well-formed answer the client must discard, so only its
// own deadline gets it out.
func (ss *session) endless(q *dns.Msg) {
	r := respond(q, Behaviour{}, ss.l.s.cfg.TTL)
	r.Id = q.Id + 1
	msg, err := r.Pack()
	if err != nil {
		return
	}
	frame := binary.BigEndian.AppendUint16(nil, uint16(len(msg)))
	frame = append(frame, msg...)
	for ss.ctx.Err() == nil && ss.writeRaw(frame) {
	}
}

// sessionSet is a listener's open sessions, for CloseIdle.
type sessionSet struct {
	mu sync.Mutex
	m  map[*session]struct{}
}

func (s *sessionSet) add(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[*session]struct{})
	}
	s.m[ss] = struct{}{}
}

func (s *sessionSet) remove(ss *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, ss)
}

// closeIdle closes every session owing no answer, as an upstream enforcing
// an idle timeout does, and returns how many it closed. Under the session's
// lock an answer is either owed or written whole, so a client that has its
// answer sees the connection as idle too.
func (s *sessionSet) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for ss := range s.m {
		ss.mu.Lock()
		if ss.pending == 0 {
			ss.cancel()
			ss.conn.Close()
			delete(s.m, ss)
			n++
		}
		ss.mu.Unlock()
	}
	return n
}
