package fakeup

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/sleep"
)

// DNS over QUIC (RFC 9250) for the scenario suite: one query per stream, a
// 2-octet length, ID 0; latency, jitter, stall, refuse and the hooks'
// faults as on the other transports. A connection counts in connections and
// handshakes when its handshake completes. idle_close closes a connection
// with DOQ_NO_ERROR once it has had no stream open for that long, as a
// server ending idle connections does (RFC 9250 §5.5); QUIC's own idle
// timeout would not do it, as a client's keep-alive PINGs hold it off.

// With early_data the listener is quic-go's early one with Allow0RTT: its
// tickets allow 0-RTT and a resumed client's early queries are answered
// before the handshake completes; the connection is counted (and resumed
// with it) when the handshake has completed, as without.

// doqIdle is the idle timeout when idle_close is not set.
const doqIdle = 30 * time.Second

// quicListener is a quic.Listener or, with early_data, a quic.EarlyListener.
type quicListener interface {
	Accept(context.Context) (*quic.Conn, error)
	Close() error
	Addr() net.Addr
}

func (l *listener) listenDoQ() error {
	conf := &quic.Config{
		HandshakeIdleTimeout: handshakeTimeout,
		MaxIdleTimeout:       doqIdle,
		MaxIncomingStreams:   maxConns,
		Allow0RTT:            l.Behaviour.EarlyData,
	}
	// The listener's own Transport, closed when the server has stopped
	// (Server.Close): the one quic.ListenAddr makes keeps its socket and
	// goroutines until its last connection's state is gone, a second or so
	// after a failed handshake, past Close.
	pc, err := net.ListenPacket("udp", l.Addr)
	if err != nil {
		return err
	}
	l.qtr = &quic.Transport{Conn: pc}
	if l.Behaviour.EarlyData {
		l.qln, err = l.qtr.ListenEarly(l.tlsConf, conf)
	} else {
		l.qln, err = l.qtr.Listen(l.tlsConf, conf)
	}
	if err != nil {
		l.qtr.Close()
		pc.Close()
		l.qtr = nil
	}
	return err
}

func (l *listener) serveDoQ() {
	for {
		c, err := l.qln.Accept(l.s.ctx)
		if err != nil {
			return // the listener or the server closed
		}
		l.s.wg.Go(func() {
			defer c.CloseWithError(0, "") // DOQ_NO_ERROR
			l.s.wg.Go(func() { l.countDoQ(c) })
			idle := newDoQIdle(c, l.Behaviour.IdleClose)
			for {
				st, err := c.AcceptStream(l.s.ctx)
				if err != nil {
					idle.stop()
					return
				}
				idle.begin()
				l.s.wg.Go(func() {
					defer idle.end()
					l.serveDoQStream(st)
				})
			}
		})
	}
}

// doqIdleClose closes its connection after the idle_close duration with no
// stream open; with idle_close 0 it does nothing.
type doqIdleClose struct {
	after time.Duration
	mu    sync.Mutex
	open  int
	timer *time.Timer // nil without idle_close
}

func newDoQIdle(c *quic.Conn, after time.Duration) *doqIdleClose {
	d := &doqIdleClose{after: after}
	if after > 0 {
		d.timer = time.AfterFunc(after, func() { c.CloseWithError(0, "idle") }) // DOQ_NO_ERROR
	}
	return d
}

func (d *doqIdleClose) begin() {
	if d.timer == nil {
		return
	}
	d.mu.Lock()
	d.open++
	d.timer.Stop()
	d.mu.Unlock()
}

func (d *doqIdleClose) end() {
	if d.timer == nil {
		return
	}
	d.mu.Lock()
	if d.open--; d.open == 0 {
		d.timer.Reset(d.after)
	}
	d.mu.Unlock()
}

func (d *doqIdleClose) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

// countDoQ counts c once its handshake has completed (at once unless the
// listener is early); a connection that ends before counts in nothing.
func (l *listener) countDoQ(c *quic.Conn) {
	select {
	case <-c.HandshakeComplete():
	case <-c.Context().Done():
		return
	}
	l.counters.connections.Add(1)
	l.counters.handshakes.Add(1)
	if c.ConnectionState().TLS.DidResume {
		l.counters.resumed.Add(1)
	}
}

func (l *listener) serveDoQStream(st *quic.Stream) {
	defer st.Close()
	st.SetReadDeadline(time.Now().Add(handshakeTimeout))
	var n [2]byte
	if _, err := io.ReadFull(st, n[:]); err != nil {
		st.CancelRead(0x2) // DOQ_PROTOCOL_ERROR
		return
	}
	buf := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(st, buf); err != nil {
		st.CancelRead(0x2)
		return
	}
	l.counters.queries.Add(1)
	q := new(dns.Msg)
	var reply *dns.Msg
	switch err := q.Unpack(buf); {
	case err != nil:
		reply = formErr(buf)
	case l.Behaviour.Stall:
		l.counters.stalled.Add(1)
		<-st.Context().Done()
		return
	default:
		reply = l.answer(l.s.ctx, q, l.takeFault())
	}
	if reply == nil {
		return
	}
	ctx, cancel := context.WithCancel(l.s.ctx)
	defer cancel()
	stop := context.AfterFunc(st.Context(), cancel)
	defer stop()
	if !sleep.For(ctx, l.delay(q)) {
		return
	}
	out, err := reply.Pack()
	if err != nil {
		return
	}
	st.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(out))), out...)); err == nil {
		l.counters.answered.Add(1)
	}
}
