package upstream

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// dotMaxPending bounds the wire IDs held on one connection. An exchange that
// leaves early keeps its ID reserved until its late response arrives, so
// unanswered queries accumulate on a connection whose upstream drops them.
// At this many (far above the pool's slots) the connection is retired: it
// takes no new exchange, the ones waiting on it keep their chance, and it
// ends when its last user leaves. Nothing fails for it: a full table is a
// fact about abandoned queries, not evidence against the exchanges in flight.
const dotMaxPending = 1024

// dnsHeaderSize is the fixed DNS header (RFC 1035 §4.1.1): a frame shorter
// than this carries no ID to match.
const dnsHeaderSize = 12

var (
	errDoTIdle    = fmt.Errorf("idle connection closed: %w", KindCanceled)
	errDoTRetired = fmt.Errorf("unresponsive connection retired: %w", KindCanceled)
	// errDoTFull is send's answer at dotMaxPending: the connection was
	// retired, try another. It never leaves the client.
	errDoTFull = errors.New("too many queries unanswered on one connection")
)

// dotConn is one pipelined DoT connection (RFC 7858, RFC 7766 §6.2.1.1).
//
// Guarantee: every query sent on it ends exactly once, either with the
// response carrying its wire ID — unique on this connection while the query
// is unanswered — or with the connection's failure. An exchange that leaves
// early (its context ended) touches no other exchange: its ID stays reserved
// until the late response arrives or the connection ends, so that response
// can never be matched to another query. One reader goroutine matches
// responses. Frames are queued, and the exchange that finds no write in
// progress writes the queue itself, in one TLS record, frames queued
// meanwhile included (a burst leaves together); the socket under the TLS
// never blocks a write (nbConn), so no exchange waits on the socket, and a
// frame is written whole or the connection ends, so cancellation never cuts
// one in half.
type dotConn struct {
	seq         uint64         // creation order in the owning DoT; a stale retry wants a newer one
	seqs        *atomic.Uint64 // the owner's counter, read when the connection fails
	idleTimeout time.Duration  // close after this long without users
	ready       chan struct{}  // closed when the dial has finished, either way
	done        chan struct{}  // closed when the connection has ended
	tc          *tls.Conn      // set before ready is closed; nil if the dial failed
	dialErr     error          // set before ready is closed
	dialAborted bool           // the dial was ended by its initiator's deadline, not by the peer

	mu      sync.Mutex // guards the fields below
	up      bool       // the dial succeeded
	retired bool       // takes no new users; ends when the last one leaves
	users   int        // exchanges that picked this connection and have not released it
	frames  uint64     // responses read so far: a sign of life
	pending map[uint16]chan dotReply
	nextID  uint16
	out     []byte // frames queued for writing
	spare   []byte // the previous write's buffer, reused for out
	writing bool   // an exchange is writing out; frames queued meanwhile are its to write
	err     error  // why the connection ended; once set it takes nothing new
	failSeq uint64 // the owner's seq when err was set
	idle    *time.Timer
	idleAt  time.Time // the idle timer acts only if nothing used the connection since
}

// dotReply is the end of one query: its response, or the connection's failure.
type dotReply struct {
	wire       []byte
	err        error
	started    bool // a frame was partly read when the connection failed: it may have been this one's
	collateral bool // another exchange's bad frame ended the connection; err is not about this one
}

func newDoTConn(seq uint64, seqs *atomic.Uint64, idleTimeout time.Duration) *dotConn {
	return &dotConn{
		seq:         seq,
		seqs:        seqs,
		idleTimeout: idleTimeout,
		ready:       make(chan struct{}),
		done:        make(chan struct{}),
		pending:     make(map[uint16]chan dotReply),
		nextID:      uint16(rand.Uint32()),
	}
}

// established records the dial's outcome and reports whether the connection
// is live, in which case the caller starts its reader and writer. If the
// connection was ended while dialing (Close), the new TLS connection is
// closed here.
func (c *dotConn) established(tc *tls.Conn, err error, aborted bool) bool {
	var discard *tls.Conn
	c.mu.Lock()
	if err == nil && c.err != nil { // ended while dialing: the client is closing
		discard, tc, err = tc, nil, c.err
	}
	if err == nil {
		c.tc, c.up = tc, true
		if c.users == 0 { // dialed ahead of need: nobody may come
			c.armIdleLocked()
		}
	} else {
		c.dialErr, c.dialAborted = err, aborted
		if c.err == nil {
			c.err = err
			c.failSeq = c.seqs.Load()
			close(c.done)
		}
	}
	c.mu.Unlock()
	close(c.ready)
	if discard != nil {
		discard.Close()
	}
	return err == nil
}

// load is the number of users, whether the dial has succeeded, and whether
// the connection takes new users.
func (c *dotConn) load() (users int, up, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.users, c.up, c.err == nil && !c.retired
}

// ended reports whether the connection has failed or closed.
func (c *dotConn) ended() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// reserve makes the caller a user, which keeps the idle timer away, and
// reports whether the connection was already up (a reused connection, for
// the stale rule). ok is false if the connection has ended.
func (c *dotConn) reserve() (reused, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.retired {
		return false, false
	}
	c.users++
	if c.users == 1 && c.idle != nil {
		c.idle.Stop()
	}
	return c.up, true
}

// release ends a user's claim; the last one starts the idle timer, or ends
// a retired connection.
func (c *dotConn) release() {
	c.mu.Lock()
	c.users--
	if c.users == 0 && c.retired {
		c.mu.Unlock()
		c.failIf(errDoTRetired, false, func() bool { return c.users == 0 })
		return
	}
	defer c.mu.Unlock()
	if c.users > 0 || c.err != nil {
		return
	}
	c.armIdleLocked()
}

// armIdleLocked starts the idle timer; the connection has no users.
func (c *dotConn) armIdleLocked() {
	c.idleAt = time.Now().Add(c.idleTimeout)
	if c.idle == nil {
		c.idle = time.AfterFunc(c.idleTimeout, c.closeIfIdle)
	} else {
		c.idle.Reset(c.idleTimeout)
	}
}

// closeIfIdle runs on the idle timer. A user that arrived in the meantime, or
// a timer that fired late for an earlier idle period, keeps the connection.
// Exchanges that left early may still hold IDs; ending them is harmless, their
// callers are gone.
func (c *dotConn) closeIfIdle() {
	c.failIf(errDoTIdle, false, func() bool {
		return c.users == 0 && !time.Now().Before(c.idleAt)
	})
}

// retireIfSilent retires the connection if no response has arrived on it
// since frames was read (at send). An exchange whose deadline passed without
// a single frame coming back suggests a dead path (a half-open connection
// looks healthy to the kernel); new exchanges go elsewhere, while those
// already pipelined here keep their chance (docs/design.md#dot-client: one exchange's end must
// not kill the others). A slow answer on a live connection does not retire
// it: other answers keep arriving.
func (c *dotConn) retireIfSilent(frames uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frames == frames {
		c.retired = true
	}
}

// send queues one query and returns the channel its end arrives on and the
// number of responses read so far (see retireIfSilent). The wire ID is
// rewritten to one unique on this connection; wire is not modified. With
// maxPending IDs already held it retires the connection and returns
// errDoTFull.
func (c *dotConn) send(wire []byte, maxPending int) (<-chan dotReply, uint64, error) {
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, 0, err
	}
	if len(c.pending) >= maxPending {
		c.retired = true // the caller's release ends it once nobody uses it
		c.mu.Unlock()
		return nil, 0, errDoTFull
	}
	id := c.nextID
	for c.pending[id] != nil { // terminates: fewer than 2^16 IDs are pending
		id++
	}
	c.nextID = id + 1
	ch := make(chan dotReply, 1) // the reader never blocks on a caller that left
	c.pending[id] = ch
	c.out = binary.BigEndian.AppendUint16(c.out, uint16(len(wire)))
	start := len(c.out)
	c.out = append(c.out, wire...)
	binary.BigEndian.PutUint16(c.out[start:], id)
	frames := c.frames
	if c.writing {
		c.mu.Unlock() // the exchange writing now writes this frame next
		return ch, frames, nil
	}
	c.writing = true
	c.mu.Unlock()
	c.writeOut()
	return ch, frames, nil
}

// writeOut writes the queued frames until the queue is empty, each batch in
// one call (one TLS record for a burst), then gives up the writing role.
// Each write returns at once (nbConn), so the loop ends as soon as a write
// finds no frame queued during the previous one. A failed write ends the
// connection; every exchange on it learns so from its reply channel.
func (c *dotConn) writeOut() {
	c.mu.Lock()
	for len(c.out) > 0 && c.err == nil {
		buf := c.out
		c.out, c.spare = c.spare[:0], nil
		c.mu.Unlock()
		if _, err := c.tc.Write(buf); err != nil {
			c.fail(err, false)
			c.mu.Lock()
			break
		}
		c.mu.Lock()
		c.spare = buf[:0]
	}
	c.writing = false
	c.mu.Unlock()
}

// failSeqNow is the owner's seq when the connection ended: a stale retry
// needs a connection created after that.
func (c *dotConn) failSeqNow() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failSeq
}

// fail ends the connection with err (the first cause wins).
func (c *dotConn) fail(err error, started bool) {
	c.end(dotReply{err: err, started: started}, false, nil)
}

// failIf ends the connection with err if it has not ended and cond (nil:
// always), checked under the lock, holds. Every pending query gets err; the
// connection's framing is no longer trustworthy, so nothing more is sent.
func (c *dotConn) failIf(err error, started bool, cond func() bool) {
	c.end(dotReply{err: err, started: started}, false, cond)
}

// failFrame ends the connection after one bad frame. The fault is one, so
// it is evidence once (docs/design.md#pool-classification): with blame set (the reader cannot tell
// whose answer the frame was) one waiting query gets err as its own
// failure, and every other waiting query gets err marked collateral, which
// the exchange retries once on a fresh connection and never records.
// Without blame (the exchange that received the frame already has its
// error) every waiting query is collateral.
func (c *dotConn) failFrame(err error, blame bool) {
	c.end(dotReply{err: err, collateral: true}, blame, nil)
}

// end ends the connection, giving every pending query r — except one, when
// blameOne, which gets r as its own failure, not collateral.
func (c *dotConn) end(r dotReply, blameOne bool, cond func() bool) {
	err := r.err
	c.mu.Lock()
	if c.err != nil || (cond != nil && !cond()) {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.failSeq = c.seqs.Load()
	pending := c.pending
	c.pending = nil
	c.out = nil
	if c.idle != nil {
		c.idle.Stop()
	}
	up := c.up
	c.mu.Unlock()
	close(c.done)
	for _, ch := range pending {
		if blameOne {
			ch <- dotReply{err: err, started: r.started}
			blameOne = false
			continue
		}
		ch <- r
	}
	if up {
		// Close after unlocking: a TLS close writes close_notify and can block
		// on a dead peer, and no exchange should wait behind it.
		c.tc.Close()
	}
}

// readLoop is the connection's one reader: it reads length-prefixed frames
// (RFC 7858 §3.3, RFC 1035 §4.2.2) and hands each to the query with its ID.
// Decoding and validation happen in the caller, off this goroutine.
func (c *dotConn) readLoop() {
	var hdr [2]byte
	for {
		n, err := io.ReadFull(c.tc, hdr[:])
		if err != nil {
			c.fail(err, n > 0)
			return
		}
		size := int(binary.BigEndian.Uint16(hdr[:]))
		if size < dnsHeaderSize {
			c.failFrame(&AttemptError{Kind: KindBadResponse, Err: fmt.Errorf("%d-byte message", size)}, true)
			return
		}
		wire := make([]byte, size)
		if _, err := io.ReadFull(c.tc, wire); err != nil {
			c.fail(err, true)
			return
		}
		if err := c.deliver(wire); err != nil {
			c.failFrame(err, true)
			return
		}
	}
}

// deliver hands a response to the query with its wire ID. An ID with no
// query is a mismatch: the upstream answered something we never asked, so
// nothing else on the connection can be trusted either.
func (c *dotConn) deliver(wire []byte) error {
	id := binary.BigEndian.Uint16(wire)
	c.mu.Lock()
	ch, ok := c.pending[id]
	delete(c.pending, id)
	c.frames++
	c.mu.Unlock()
	if !ok {
		return &AttemptError{Kind: KindResponseMismatch, Err: fmt.Errorf("response with unknown id %d", id)}
	}
	ch <- dotReply{wire: wire}
	return nil
}
