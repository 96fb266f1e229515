package pathemu

import (
	"errors"
	"io"
	"net"
	"time"
)

// TCP across the emulated path. The kernel completes the client's connect
// to the relay at once, so the relay replays what a real path would do:
//
//	t0          the client's connect returns (really: its SYN leaves)
//	t0 + RTT/2  the SYN reaches the server: the relay dials the target
//	t0 + RTT    the SYN-ACK reaches the client: only now could it send, so
//	            bytes it wrote earlier count as sent at t0 + RTT
//
// and every chunk then takes RTT/2 (plus jitter) to the other side. A TLS
// 1.3 handshake thus completes, as the client sees it, at t0 + 2·RTT, and
// its first query is answered at t0 + 3·RTT, as on the wire.

// chunkQueue bounds the chunks in flight in one direction. A full queue
// stops the reader, so a fast sender meets TCP back-pressure instead of the
// relay buffering without limit: at most chunkQueue × chunkSize bytes
// (4 MiB) per direction.
const (
	chunkQueue = 256
	chunkSize  = 16 << 10
)

// chunk is bytes read from one side, due at the other at due; nil data is
// the sender's end of stream (a FIN), delivered in order like the bytes.
type chunk struct {
	data []byte
	due  time.Time
}

// Accept retry pauses: out of descriptors (EMFILE) and the like pass, so
// the relay pauses and tries again, as net/http's Server.Serve does, rather
// than stop relaying for good. internal/server's errorPause does the same
// for nxdns's listeners, but it is bound to their listener and logger;
// exporting it would make this test tool import the server.
const (
	minAcceptPause = 5 * time.Millisecond
	maxAcceptPause = time.Second
)

// acceptLoop relays every connection l accepts until l is closed (Close).
func (r *Relay) acceptLoop(l net.Listener) {
	var pause time.Duration
	for {
		c, err := l.Accept()
		if errors.Is(err, net.ErrClosed) {
			return // Close
		}
		if err != nil {
			pause = min(max(2*pause, minAcceptPause), maxAcceptPause)
			t := time.NewTimer(pause)
			select {
			case <-r.stop:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		pause = 0
		if !r.track(c) {
			continue
		}
		r.wg.Go(func() { r.relayTCP(c, time.Now()) })
	}
}

// relayTCP carries one connection accepted at t0 until both directions end
// or either side fails.
func (r *Relay) relayTCP(client net.Conn, t0 time.Time) {
	defer r.untrack(client)
	if !sleepUntil(t0.Add(r.path.oneWay()), client) {
		return
	}
	up, err := net.Dial("tcp", r.target)
	if err != nil {
		// The client learns of the refusal (a reset) half a round trip later.
		sleepUntil(time.Now().Add(r.path.oneWay()), client)
		if tc, ok := client.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		return
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	synAck := t0.Add(r.path.RTT) // when the client could first have sent
	done := make(chan struct{}, 2)
	go r.pipe(up, client, synAck, done)
	go r.pipe(client, up, time.Time{}, done)
	<-done
	<-done
}

// pipe carries one direction, src to dst: a reader stamps each chunk with
// its due time (never before the previous chunk's: TCP keeps order, and
// never before notBefore plus the one-way delay) and a writer delivers it
// then. It reports on done when the direction has ended; a failure on
// either side closes both.
func (r *Relay) pipe(dst, src net.Conn, notBefore time.Time, done chan<- struct{}) {
	defer func() { done <- struct{}{} }()
	q := make(chan chunk, chunkQueue)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		r.deliver(dst, src, q)
	}()
	var last time.Time
	for {
		buf := make([]byte, chunkSize)
		n, err := src.Read(buf)
		if n > 0 {
			sent := time.Now()
			if sent.Before(notBefore) {
				sent = notBefore
			}
			due := sent.Add(r.path.oneWay())
			if due.Before(last) {
				due = last
			}
			last = due
			select {
			case q <- chunk{data: buf[:n], due: due}:
			case <-writerDone: // the writer failed: nothing more goes through
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				due := time.Now().Add(r.path.oneWay())
				if due.Before(last) {
					due = last
				}
				select {
				case q <- chunk{due: due}:
				case <-writerDone:
				}
			} else {
				// A reset or a closed relay: the other side sees it too.
				dst.Close()
			}
			close(q)
			<-writerDone
			return
		}
	}
}

// deliver writes each chunk to dst when it is due, and passes the end of
// stream on as a half-close. A failed write closes src too, so its reader
// stops.
func (r *Relay) deliver(dst, src net.Conn, q <-chan chunk) {
	for c := range q {
		if !sleepUntil(c.due, dst) {
			return
		}
		if c.data == nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			} else {
				dst.Close()
			}
			continue
		}
		if _, err := dst.Write(c.data); err != nil {
			src.Close()
			dst.Close()
			for range q { // let the reader finish
			}
			return
		}
	}
}

// sleepUntil waits until t, the emulated path's delay. It reports false if
// the relay closed conn meanwhile (checked once the wait is over: a closed
// relay drops what was on the path).
func sleepUntil(t time.Time, conn net.Conn) bool {
	if d := time.Until(t); d > 0 {
		time.Sleep(d)
	}
	// A zero-length write is a cheap "is it closed" probe that sends nothing.
	_, err := conn.Write(nil)
	return !errors.Is(err, net.ErrClosed)
}
