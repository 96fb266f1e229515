package forward

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/upstream"
)

// longAgo is a deadline in the past. Setting it wakes every blocked read and
// write on a socket at once: the way an exclusive socket obeys its context
// (as Go's net/fd_unix.go and crypto/tls/conn.go do).
var longAgo = time.Unix(1, 0)

// headerLen is the fixed DNS header (RFC 1035 §4.1.1): a shorter datagram
// cannot be an answer.
const headerLen = 12

// udpBufs holds receive buffers of the largest DNS message. A resolver may
// answer with more than the query's EDNS size advertised; a short buffer
// would cut the datagram and turn a valid answer into garbage, and a pooled
// 64 KiB buffer costs nothing per exchange.
var udpBufs = sync.Pool{New: func() any {
	b := make([]byte, dns.MaxMsgSize)
	return &b
}}

// Resolve forwards q to the zone's resolver and returns its answer with q's
// ID, whatever its rcode: a zone has one resolver, so there is nothing to
// fail over to and the client gets what the LAN said. upstream is always the
// zone's resolver URL (docs/design.md#forward-zones: the query log names it, success or failure).
// A failure is a *upstream.QueryError naming that resolver: KindPeerTimeout
// when read_timeout expired (a zone has one resolver, so the budget/peer
// distinction is pool policy only), the caller's cause (KindCanceled unless
// it carries a Kind) when ctx ended first. Resolve does not modify q and is
// safe for concurrent use.
func (z *Zone) Resolve(ctx context.Context, q *dns.Msg) (resp *dns.Msg, upstreamURL string, err error) {
	z.queries.Add(1)
	resp, err = z.exchange(ctx, q)
	if err != nil {
		kind := upstream.Classify(err)
		if kind.Group() == upstream.PeerFault {
			z.failures.Add(1) // cancellation and our own shortages say nothing about the resolver
			z.health.failure(err, false)
		}
		return nil, z.url, &upstream.QueryError{
			Kind:       kind,
			Tried:      []string{z.url},
			Attributed: z.url,
			Budget:     z.timeout,
			Err:        err,
		}
	}
	z.health.success()
	return resp, z.url, nil
}

// Exchange is Resolve for the route (server.Resolver): the zone's one
// resolver is the upstream tried and attributed, answer or failure.
func (z *Zone) Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error) {
	resp, up, err := z.Resolve(ctx, q)
	return upstream.Result{Msg: resp, Upstream: up, Tried: []string{up}}, err
}

// exchange runs one whole exchange under one deadline. The returned error is
// an *upstream.AttemptError whose Kind was read before the deadline's context
// was cancelled.
func (z *Zone) exchange(parent context.Context, q *dns.Msg) (*dns.Msg, error) {
	// The one deadline of docs/design.md#forward-zones, fixed once: the UDP leg, a TC=1 fallback
	// and the TCP leg all spend it, so a truncated answer followed by a
	// stalled TCP retry costs one read_timeout, not two. WithDeadlineCause
	// keeps the earlier of this and the caller's deadline, and its cause tells
	// our expiry (KindPeerTimeout) from the caller's.
	ctx, cancel := context.WithDeadlineCause(parent, time.Now().Add(z.timeout), upstream.KindPeerTimeout)
	defer cancel() // sets no cause we read: upstream.KindOf runs before it
	if ctx.Err() != nil {
		return nil, z.fail(ctx, context.Cause(ctx))
	}
	// A copy with an ID of our own: the client chose q.Id, and a fresh random
	// one makes an off-path forgery of the LAN's answer harder (RFC 5452 §4.3).
	m := q.Copy()
	m.Id = uint16(rand.Uint32())
	wire, err := m.Pack()
	if err != nil {
		// The client's query does not serialise: our problem, no peer's.
		return nil, &upstream.AttemptError{Upstream: z.url, Kind: upstream.KindNoResources, Err: err}
	}
	resp, err := z.legs(ctx, m, wire)
	if err != nil {
		return nil, z.fail(ctx, err)
	}
	resp.Id = q.Id
	return resp, nil
}

// legs sends the query over UDP, retrying over TCP on TC=1 (RFC 7766 §5), or
// over TCP alone for a tcp:// resolver. Both legs spend ctx's one deadline.
func (z *Zone) legs(ctx context.Context, m *dns.Msg, wire []byte) (*dns.Msg, error) {
	if z.client != nil {
		return z.client.Exchange(ctx, m) // validated; it spends ctx's deadline too
	}
	if z.network == netUDP {
		resp, err := z.udp(ctx, m, wire)
		if err != nil || !resp.Truncated {
			return resp, err
		}
		z.truncated.Add(1)
	}
	return z.tcp(ctx, m, wire)
}

// udp sends one datagram and waits for the answer to it. The socket is
// connected, so the kernel already drops datagrams from any other source
// address, and an ICMP port unreachable fails the exchange at once
// (ECONNREFUSED) rather than after read_timeout. A datagram that is not a
// response to this question (another ID, question or garbage) is discarded
// and the receive resumes under the same deadline: no datagram extends it.
func (z *Zone) udp(ctx context.Context, m *dns.Msg, wire []byte) (*dns.Msg, error) {
	conn, err := net.DialUDP("udp", nil, z.udpAddr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(longAgo) })
	defer stop()
	if _, err := conn.Write(wire); err != nil {
		return nil, err
	}
	bp := udpBufs.Get().(*[]byte)
	defer udpBufs.Put(bp)
	for {
		n, err := conn.Read(*bp)
		if err != nil {
			return nil, err
		}
		if resp := answerTo(m, (*bp)[:n]); resp != nil {
			return resp, nil
		}
	}
}

// answerTo decodes a datagram if it is a response to m, or returns nil. The
// ID is compared before decoding, so a flood of foreign datagrams costs no
// allocation.
func answerTo(m *dns.Msg, datagram []byte) *dns.Msg {
	if len(datagram) < headerLen || binary.BigEndian.Uint16(datagram) != m.Id {
		return nil
	}
	resp, err := upstream.Unpack(datagram)
	if err != nil || upstream.Validate(m, resp) != nil {
		return nil
	}
	return resp
}

// tcp runs the exchange over a fresh TCP connection with the 2-byte length
// framing of RFC 1035 §4.2.2. On a connection of its own a response that is
// not to this query is a peer fault, not a stray to skip.
func (z *Zone) tcp(ctx context.Context, m *dns.Msg, wire []byte) (*dns.Msg, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, netTCP, z.tcpAddr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(longAgo) })
	defer stop()
	out := make([]byte, 2+len(wire)) // one write: no Nagle delay between prefix and message
	binary.BigEndian.PutUint16(out, uint16(len(wire)))
	copy(out[2:], wire)
	if _, err := conn.Write(out); err != nil {
		return nil, err
	}
	var prefix [2]byte
	if _, err := io.ReadFull(conn, prefix[:]); err != nil {
		return nil, err
	}
	in := make([]byte, binary.BigEndian.Uint16(prefix[:]))
	if _, err := io.ReadFull(conn, in); err != nil {
		return nil, err
	}
	resp, err := upstream.Unpack(in)
	if err != nil {
		return nil, err
	}
	if err := upstream.ValidateStream(m, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// fail classifies err with the one classifier, upstream.KindOf, which reads
// ctx first: when our deadline ended the exchange its cause is
// KindPeerTimeout (the "i/o timeout" of the poisoned socket is a symptom); a
// caller's cause passes through when it is a Kind and is a cancellation
// otherwise.
func (z *Zone) fail(ctx context.Context, err error) error {
	return &upstream.AttemptError{Upstream: z.url, Kind: upstream.KindOf(ctx, err), Err: err}
}
