package burst

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/miekg/dns"
)

// ednsSize is the buffer the queries advertise: the DNS Flag Day 2020 value.
// Queries carry EDNS so a resolver can attach an Extended DNS Error (RFC
// 8914, an EDNS option) to its SERVFAIL.
const ednsSize = 1232

// errMismatch is a TCP reply whose ID is not the query's.
var errMismatch = errors.New("reply ID does not match the query")

// longAgo, as a deadline, fails every pending read and write at once.
var longAgo = time.Unix(1, 0)

// result is what one query came to.
type result struct {
	latency time.Duration // from dialing to the reply, the timeout or the error
	reply   *dns.Msg      // nil on timeout or error
	timeout bool          // the per-query timeout expired first
	err     error         // a failure other than the timeout
}

// exchange sends q through rt (roundTrip's fresh socket, or a session's
// shared connection), times it and classifies its outcome.
func exchange(ctx context.Context, rt func(context.Context, *dns.Msg) (*dns.Msg, error), q *dns.Msg) result {
	begin := time.Now()
	reply, err := rt(ctx, q)
	r := result{latency: time.Since(begin), reply: reply}
	switch {
	case err == nil:
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded) || isTimeout(err):
		r.timeout = true
	default:
		r.err = err
	}
	return r
}

// roundTrip sends q from a fresh socket, as each stub resolver of a real
// client has its own, and waits for its reply until ctx ends. Over UDP a
// datagram that is not the reply (wrong ID, not a response, undecodable) is
// ignored and the wait continues under the same deadline.
func roundTrip(ctx context.Context, network, addr string, q *dns.Msg) (*dns.Msg, error) {
	wire, err := q.Pack()
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	// The deadline covers the timeout; this covers an interrupted run.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(longAgo) })
	defer stop()
	if network == "tcp" {
		return roundTripTCP(conn, q.Id, wire)
	}
	return roundTripUDP(conn, q.Id, wire)
}

func roundTripUDP(conn net.Conn, id uint16, wire []byte) (*dns.Msg, error) {
	if _, err := conn.Write(wire); err != nil {
		return nil, err
	}
	buf := make([]byte, dns.MaxMsgSize)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return nil, err
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) == nil && m.Response && m.Id == id {
			return m, nil
		}
	}
}

func roundTripTCP(conn net.Conn, id uint16, wire []byte) (*dns.Msg, error) {
	if _, err := conn.Write(framed(wire)); err != nil {
		return nil, err
	}
	m, err := readFramed(conn)
	if err != nil {
		return nil, err
	}
	if m.Id != id {
		return nil, errMismatch
	}
	return m, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
