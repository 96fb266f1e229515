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
	backlog  []byte // bytes the socket did not take, in order
	flushing bool   // the flusher runs; every write queues behind it
	err      error  // the flusher's failure: every later write fails with it
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
	return &nbConn{TCPConn: tc, raw: raw, fail: fail}, nil
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
		var werr error
		err := c.raw.Write(func(fd uintptr) bool {
			for len(rest) > 0 {
				n, err := syscall.Write(int(fd), rest)
				if err == syscall.EINTR {
					continue
				}
				if err != nil {
					if err != syscall.EAGAIN {
						werr = err
					}
					return true
				}
				rest = rest[n:]
			}
			return true
		})
		if err == nil {
			err = werr
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
