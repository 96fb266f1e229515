package upstream

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"
)

// nbConn is the TCP connection under a DoT client's TLS, with a Write that
// never blocks: it writes what the socket takes at once and queues the rest
// for a goroutine of its own, which writes it in order under
// transportWriteTimeout. So an exchange can write its own frame, without
// waking a writer goroutine for every query (docs/performance.md "Where a
// miss goes"), and still never waits on the socket. A DNS query fits the
// socket buffer many times over: the queue fills only when the peer stops
// reading, and a write that blocks past the timeout ends the connection
// through fail, as any failed write does.
type nbConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	fail func(error) // ends the DoT connection; called once, from the flusher

	mu       sync.Mutex
	backlog  []byte                // bytes the socket did not take, in order
	flushing bool                  // the flusher runs; every write queues behind it
	err      error                 // the flusher's failure: every later write fails with it
	rest     []byte                // Write's bytes not yet taken by the socket (writeSome)
	werr     error                 // writeSome's failure
	writeFD  func(fd uintptr) bool // writeSome, bound once: no closure per write
}

func newNBConn(c net.Conn, fail func(error)) (net.Conn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil // a test's pipe: plain blocking writes
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	nb := &nbConn{TCPConn: tc, raw: raw, fail: fail}
	nb.writeFD = nb.writeSome
	return nb, nil
}

// writeSome writes c.rest to fd without waiting, leaving in c.rest what the
// socket did not take, and in c.werr a failure other than a full buffer.
// Write calls it under c.mu.
func (c *nbConn) writeSome(fd uintptr) bool {
	for len(c.rest) > 0 {
		n, err := syscall.Write(int(fd), c.rest)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return true
		case err != nil:
			c.werr = err
			return true
		}
		c.rest = c.rest[n:]
	}
	return true
}

// Write writes p, or queues what the socket does not take, and returns at
// once: len(p), or the error that ended the connection's writing.
func (c *nbConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	rest := p
	if !c.flushing {
		c.rest, c.werr = p, nil
		err := c.raw.Write(c.writeFD)
		rest, c.rest = c.rest, nil
		if err == nil {
			err = c.werr
		}
		if err != nil {
			c.err = err
			return 0, err
		}
		if len(rest) == 0 {
			return len(p), nil
		}
	}
	c.backlog = append(c.backlog, rest...)
	if !c.flushing {
		c.flushing = true
		go c.flush()
	}
	return len(p), nil
}

// flush writes the backlog with ordinary blocking writes until it is empty,
// each under transportWriteTimeout, then lets Write write directly again.
func (c *nbConn) flush() {
	var buf []byte
	for {
		c.mu.Lock()
		if len(c.backlog) == 0 {
			c.TCPConn.SetWriteDeadline(time.Time{}) // the direct writes check it
			c.flushing = false
			c.mu.Unlock()
			return
		}
		buf, c.backlog = c.backlog, buf[:0]
		c.mu.Unlock()
		c.TCPConn.SetWriteDeadline(time.Now().Add(transportWriteTimeout))
		if _, err := c.TCPConn.Write(buf); err != nil {
			c.mu.Lock()
			c.err, c.backlog = err, nil
			c.mu.Unlock()
			if !errors.Is(err, net.ErrClosed) {
				c.fail(err)
			}
			return
		}
	}
}
