package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nxdns/nxdns/internal/query"
)

// tcpConn serves one client connection with RFC 7766 §6.2.1.1 pipelining:
// one reader takes queries off the wire in order, each query is answered in
// its own goroutine, and answers are written as they complete, so a slow
// query does not hold up a fast one sent after it (the client matches
// answers by message ID). miekg/dns's Server cannot do this: v1.1.x serves
// the queries of one connection one after another (server.go serveTCPConn).
//
// Guarantees:
//   - at most maxConnQueries queries of the connection run at once; at the
//     cap the reader stops reading and TCP flow control holds the client;
//   - an answer is written whole (length prefix and message in one write,
//     under wmu), so frames never interleave; after a failed write no more
//     answers are written and the connection closes;
//   - no query starts on the old framing after a read error, and the socket
//     closes only after the reader has stopped and every query of the
//     connection has returned, so nothing writes to a closed socket;
//   - a connection with no query arriving for the idle bound, or a message
//     not completed within the read bound, is closed and counted.
//
// The idle bound runs from the last query received, not the last answer
// sent (RFC 7766 §6.2.3 counts from the last outstanding answer). Since a
// resolver's budget (4 s by default) is shorter than the bound, an
// outstanding query answers first in practice; if not, the reader stops and
// the answers are still written before the connection closes.
type tcpConn struct {
	s      *Server
	l      *listener
	conn   net.Conn // a *net.TCPConn, or a *tls.Conn for DoT (dot.go)
	client netip.Addr
	proto  query.Proto // TCP or DoT, for the query event
	// clientID is the ClientID of a DoT connection's SNI (clientid.go),
	// set after the handshake, before the first query is read; "" for none.
	clientID string

	// ctx is the parent of the connection's queries: cancelled when a write
	// fails, since nobody will read the other answers either.
	ctx    context.Context
	cancel context.CancelFunc

	slots   chan struct{} // one token per running query, cap maxConnQueries
	queries sync.WaitGroup
	prefix  [2]byte // the reader's length-prefix buffer (only serve's goroutine touches it)

	wmu    sync.Mutex  // serialises answers: one frame at a time
	broken atomic.Bool // a write failed: write nothing more, stop reading
}

func newTCPConn(s *Server, l *listener, c net.Conn, client netip.Addr, proto query.Proto) *tcpConn {
	ctx, cancel := context.WithCancel(s.ctx)
	return &tcpConn{
		s: s, l: l, conn: c, client: client, proto: proto,
		ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, maxConnQueries),
	}
}

// serve reads queries until the client leaves, a bound expires or the
// listener stops, then waits for the queries it started and closes.
func (c *tcpConn) serve() {
	defer c.close()
	for c.takeSlot() {
		wire, err := c.readMsg()
		if err != nil {
			<-c.slots
			c.countReadError(err)
			return
		}
		c.queries.Go(func() {
			defer func() { <-c.slots }()
			c.s.serveAs(c.ctx, wire, c.client, c.proto, c.clientID, c.write)
		})
	}
}

func (c *tcpConn) close() {
	c.queries.Wait()
	c.cancel()
	c.conn.Close()
	c.l.untrack(c)
}

// takeSlot waits for room for one more query; false when the connection or
// listener is going away.
func (c *tcpConn) takeSlot() bool {
	select {
	case c.slots <- struct{}{}:
		return true
	case <-c.l.stopc:
		return false
	case <-c.ctx.Done():
		return false
	}
}

// readError says which bound a read broke, for the counters.
type readError struct {
	idle bool // waiting for a message to begin, as opposed to inside one
	err  error
}

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

var errTooLarge = errors.New("query over the TCP size limit")

// readMsg reads one length-prefixed message. Waiting for it to begin is
// bounded by the idle timeout, its body by the (shorter) read timeout.
func (c *tcpConn) readMsg() ([]byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(c.s.tcpIdle))
	// Checked after arming the deadline: stop and a failed write set
	// longAgo after flagging, so either we see the flag here or their
	// deadline wins over ours.
	if c.l.stopping() || c.broken.Load() {
		return nil, &readError{idle: true, err: net.ErrClosed}
	}
	if _, err := io.ReadFull(c.conn, c.prefix[:]); err != nil {
		return nil, &readError{idle: true, err: err}
	}
	n := int(binary.BigEndian.Uint16(c.prefix[:]))
	if n > maxTCPQuerySize {
		return nil, &readError{err: errTooLarge}
	}
	c.conn.SetReadDeadline(time.Now().Add(c.s.tcpRead))
	wire := make([]byte, n)
	if _, err := io.ReadFull(c.conn, wire); err != nil {
		return nil, &readError{err: err}
	}
	return wire, nil
}

// countReadError counts the disconnects the operator should see: a client
// idle past the bound, one too slow inside a message, one sending a message
// too large to be a query. A client closing, or our own stop, counts nothing.
func (c *tcpConn) countReadError(err error) {
	if c.l.stopping() || c.broken.Load() {
		return
	}
	var re *readError
	errors.As(err, &re)
	var ne net.Error
	switch {
	case errors.Is(err, errTooLarge):
		c.s.stats.malformed.Add(1)
	case errors.As(err, &ne) && ne.Timeout():
		if re != nil && re.idle {
			c.s.stats.tcpIdle.Add(1)
		} else {
			c.s.stats.tcpSlow.Add(1)
		}
	}
}

// stopReading makes the reader return after the message it is reading, if
// any (the listener is stopping; see readMsg for the ordering).
func (c *tcpConn) stopReading() { c.conn.SetReadDeadline(longAgo) }

// write sends one answer, bounded by the write timeout, and reports a
// failure (errBroken after an earlier one). A failure poisons the
// connection: its framing is no longer known to the client.
func (c *tcpConn) write(ans []byte) error {
	frame := make([]byte, 2+len(ans))
	binary.BigEndian.PutUint16(frame, uint16(len(ans)))
	copy(frame[2:], ans)

	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.broken.Load() {
		return errBroken
	}
	c.conn.SetWriteDeadline(time.Now().Add(c.s.tcpWrite))
	if _, err := c.conn.Write(frame); err != nil {
		c.broken.Store(true)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !c.l.stopping() {
			c.s.stats.tcpSlow.Add(1)
		}
		c.cancel()
		c.conn.SetReadDeadline(longAgo)
		return err
	}
	return nil
}

// errBroken is an answer not written because an earlier write on the
// connection failed.
var errBroken = errors.New("connection broken by an earlier failed write")
