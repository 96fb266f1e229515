package fakeup

import (
	"context"
	"encoding/binary"
	"io"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/sleep"
)

// DNS over QUIC (RFC 9250) for the scenario suite: one query per stream, a
// 2-octet length, ID 0; latency, jitter, stall, refuse and the hooks'
// faults as on the other transports. A connection counts in connections and
// handshakes when its handshake completes. idle_close is QUIC's own idle
// timeout (the smaller of both peers' wins, RFC 9000 §10.1).

// doqIdle is the idle timeout when idle_close is not set.
const doqIdle = 30 * time.Second

func (l *listener) listenDoQ() error {
	idle := doqIdle
	if l.Behaviour.IdleClose > 0 {
		idle = l.Behaviour.IdleClose
	}
	ln, err := quic.ListenAddr(l.Addr, l.tlsConf, &quic.Config{
		HandshakeIdleTimeout: handshakeTimeout,
		MaxIdleTimeout:       idle,
		MaxIncomingStreams:   maxConns,
	})
	if err != nil {
		return err
	}
	l.qln = ln
	return nil
}

func (l *listener) serveDoQ() {
	for {
		c, err := l.qln.Accept(l.s.ctx)
		if err != nil {
			return // the listener or the server closed
		}
		l.counters.connections.Add(1)
		l.counters.handshakes.Add(1)
		if c.ConnectionState().TLS.DidResume {
			l.counters.resumed.Add(1)
		}
		l.s.wg.Go(func() {
			defer c.CloseWithError(0, "") // DOQ_NO_ERROR
			for {
				st, err := c.AcceptStream(l.s.ctx)
				if err != nil {
					return
				}
				l.s.wg.Go(func() { l.serveDoQStream(st) })
			}
		})
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
