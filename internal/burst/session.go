package burst

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
)

// session is one encrypted connection that every query of a run shares, as
// a phone's Private DNS or a forwarder does: -proto dot pipelines the
// queries on one TLS connection (RFC 7858 §3.3, RFC 7766 §6.2.1.1), -proto
// doq gives each its own stream on one QUIC connection (RFC 9250 §4.2). The
// dial happens before the baseline, outside every query's latency.
type session interface {
	exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error)
	close()
}

// doqALPN is DNS over QUIC's TLS application protocol (RFC 9250 §4.1.1).
const doqALPN = "doq"

// doqCancelled is DOQ_REQUEST_CANCELLED (RFC 9250 §4.3), sent when a query
// times out on its stream.
const doqCancelled = 0x3

// errSessionClosed fails the queries still waiting when the shared
// connection ends.
var errSessionClosed = errors.New("connection closed")

// clientTLS is the TLS configuration of -proto dot and doq: the roots of
// -ca-file (the system's when empty), or no verification with -insecure.
func clientTLS(cfg Config, host string, alpn ...string) (*tls.Config, error) {
	tc := &tls.Config{ServerName: cfg.TLSName, NextProtos: alpn, MinVersion: tls.VersionTLS12}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	if cfg.Insecure {
		tc.InsecureSkipVerify = true // loopback measurements only; the flag says so
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca-file %s: no PEM certificate in it", cfg.CAFile)
		}
	}
	return tc, nil
}

// dialSession opens the run's one connection for cfg.Proto, within the
// per-query timeout.
func dialSession(ctx context.Context, cfg Config, addr string) (session, error) {
	host, _, _ := net.SplitHostPort(cfg.Target)
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	switch cfg.Proto {
	case ProtoDoT:
		tc, err := clientTLS(cfg, host)
		if err != nil {
			return nil, err
		}
		d := tls.Dialer{Config: tc}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("dot %s: %w", addr, err)
		}
		return newDoTSession(c.(*tls.Conn)), nil
	case ProtoDoQ:
		tc, err := clientTLS(cfg, host, doqALPN)
		if err != nil {
			return nil, err
		}
		tc.MinVersion = tls.VersionTLS13 // QUIC is TLS 1.3 only (RFC 9001 §4.2)
		c, err := quic.DialAddr(ctx, addr, tc, &quic.Config{
			MaxIdleTimeout:  30 * time.Second,
			KeepAlivePeriod: 10 * time.Second, // a run's idle gaps do not end it
		})
		if err != nil {
			return nil, fmt.Errorf("doq %s: %w", addr, err)
		}
		return &doqSession{conn: c}, nil
	}
	return nil, fmt.Errorf("proto %q: no shared connection", cfg.Proto)
}

// doqSession sends each query on its own bidirectional stream of one QUIC
// connection.
type doqSession struct{ conn *quic.Conn }

func (s *doqSession) close() { s.conn.CloseWithError(0, "") } // DOQ_NO_ERROR

func (s *doqSession) exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	wire, err := q.Pack()
	if err != nil {
		return nil, err
	}
	wire[0], wire[1] = 0, 0 // RFC 9250 §4.2.1: the Message ID is 0
	st, err := s.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	if dl, ok := ctx.Deadline(); ok {
		st.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() {
		st.CancelWrite(doqCancelled)
		st.CancelRead(doqCancelled)
	})
	defer stop()
	if _, err := st.Write(framed(wire)); err != nil {
		return nil, err
	}
	if err := st.Close(); err != nil { // FIN: one query per stream
		return nil, err
	}
	m, err := readFramed(st)
	if err != nil {
		return nil, err
	}
	// The server ends the stream after its one reply (RFC 9250 §4.2): read
	// that FIN rather than cancel the read side, since a STOP_SENDING
	// would cost the server a frame per query that a client reading to
	// the end never sends. Anything but the FIN is not ours to read.
	var extra [1]byte
	if _, err := io.ReadFull(st, extra[:]); !errors.Is(err, io.EOF) {
		st.CancelRead(0)
	}
	m.Id = q.Id
	return m, nil
}

// framed is wire with its 2-octet length in front (RFC 1035 §4.2.2).
func framed(wire []byte) []byte {
	return append(binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(wire)), uint16(len(wire))), wire...)
}

// readFramed reads one DNS message with its 2-octet length (RFC 1035
// §4.2.2, RFC 9250 §4.2).
func readFramed(r io.Reader) (*dns.Msg, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf); err != nil {
		return nil, fmt.Errorf("undecodable reply: %w", err)
	}
	return m, nil
}

// dotSession pipelines queries on one TLS connection: each is written as
// soon as it is asked, under a fresh ID no other pending query holds, and
// one reader hands every reply to the query of its ID, in whatever order
// the server answers (RFC 7766 §7).
type dotSession struct {
	conn *tls.Conn
	wmu  sync.Mutex // serialises writes
	done chan struct{}

	mu      sync.Mutex // guards the fields below
	pending map[uint16]chan *dns.Msg
	next    uint16
	err     error // why the reader stopped; set before done is closed
}

func newDoTSession(c *tls.Conn) *dotSession {
	s := &dotSession{conn: c, done: make(chan struct{}), pending: make(map[uint16]chan *dns.Msg)}
	go s.read()
	return s
}

func (s *dotSession) close() {
	s.conn.Close()
	<-s.done
}

func (s *dotSession) read() {
	var err error
	for {
		var m *dns.Msg
		if m, err = readFramed(s.conn); err != nil {
			break
		}
		s.mu.Lock()
		ch := s.pending[m.Id]
		delete(s.pending, m.Id)
		s.mu.Unlock()
		if ch != nil {
			ch <- m // buffered: the reader never waits on a query
		}
	}
	s.mu.Lock()
	s.err = fmt.Errorf("%w: %w", errSessionClosed, err)
	s.mu.Unlock()
	close(s.done)
}

// register reserves an ID for one query; maxInFlight (below 65 536) bounds
// the pending queries, so a free ID always exists. IDs count up, so an ID
// is reused only 65 536 queries later: a late reply to a query that timed
// out finds no one waiting and is dropped, not given to another query.
func (s *dotSession) register() (uint16, chan *dns.Msg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return 0, nil, s.err
	}
	for s.pending[s.next] != nil {
		s.next++
	}
	id := s.next
	s.next++
	ch := make(chan *dns.Msg, 1)
	s.pending[id] = ch
	return id, ch, nil
}

func (s *dotSession) forget(id uint16) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

func (s *dotSession) exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	id, ch, err := s.register()
	if err != nil {
		return nil, err
	}
	defer s.forget(id)
	m := q.Copy()
	m.Id = id
	wire, err := m.Pack()
	if err != nil {
		return nil, err
	}
	s.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		s.conn.SetWriteDeadline(dl) // a server that stops reading fails the write, not the run
	}
	_, err = s.conn.Write(framed(wire))
	s.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		r.Id = q.Id
		return r, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, s.err
	}
}
