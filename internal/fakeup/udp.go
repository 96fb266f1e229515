package fakeup

import (
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/sleep"
)

// udpMaxInFlight bounds the delayed UDP answers one listener holds. Past it
// the reader stops reading and the kernel's socket buffer drops the excess,
// which is what a saturated real resolver looks like from outside.
const udpMaxInFlight = 8192

// serveUDP reads datagrams until the socket closes. An answer with no delay
// is written inline (the fast path the throughput benchmark measures); a
// delayed one waits on its own goroutine. Every answer here fits in 512
// bytes (one question, at most one short record, an OPT), so no reply needs
// truncating for the client's buffer size.
func (l *listener) serveUDP() {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, udpMaxInFlight)
	buf := make([]byte, dns.MaxMsgSize)
	backoff := time.Duration(0)
	for {
		n, peer, err := l.pc.ReadFrom(buf)
		if err != nil {
			if !l.retry(err, &backoff) {
				return
			}
			continue
		}
		backoff = 0
		l.counters.queries.Add(1)
		q := new(dns.Msg)
		var reply *dns.Msg
		switch err := q.Unpack(buf[:n]); {
		case err != nil:
			reply = formErr(buf[:n])
		case q.Response: // RFC 1035 §7.3: never answer a response
		case l.Behaviour.Stall:
			reply = q // stand-in: it would be answered, and stalls instead
		default:
			reply = l.answer(l.s.ctx, q, l.takeFault())
		}
		switch {
		case reply == nil:
			continue
		case l.Behaviour.Stall:
			l.counters.stalled.Add(1)
			continue
		}
		d := l.delay(q)
		if d <= 0 {
			l.writeUDP(reply, peer)
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-l.s.ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if sleep.For(l.s.ctx, d) {
				l.writeUDP(reply, peer)
			}
		})
	}
}

func (l *listener) writeUDP(m *dns.Msg, peer net.Addr) {
	out, err := m.Pack()
	if err != nil {
		return // our own message: cannot happen for what respond builds
	}
	if _, err := l.pc.WriteTo(out, peer); err == nil {
		l.counters.answered.Add(1)
	}
}
