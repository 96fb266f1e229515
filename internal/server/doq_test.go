package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/upstream"
)

// startDoQServer is a server with one DoQ listener on 127.0.0.1 behind p's
// certificate, answering through st.
func startDoQServer(t *testing.T, st *State, p *testPKI) (*Server, netip.AddrPort) {
	t.Helper()
	s := startTLSServer(t, st, p)
	if err := s.ListenDoQ([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	return s, netip.MustParseAddrPort(s.DoQAddrs()[0].String())
}

// doqClient is nxdns's own DoQ upstream client (internal/upstream) aimed at
// addr, trusting p's CA.
func doqClient(t *testing.T, p *testPKI, addr netip.AddrPort) upstream.Client {
	t.Helper()
	ep, err := upstream.ParseEndpoint(fmt.Sprintf("quic://%s:%d", testServerName, addr.Port()), addr.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	c := upstream.NewDoQ(ep, p.ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	return c
}

func protoCount(s *Server, proto string) uint64 {
	for _, pc := range s.Snapshot().Protos {
		if pc.Proto == proto {
			return pc.Count
		}
	}
	return 0
}

func TestDoQ_answersTheDoQClientAndCountsTheProto(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	c := doqClient(t, p, addr)
	for _, name := range []string{"a.example.", "b.example."} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := c.Exchange(ctx, newQuery(name, dns.TypeA))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.A).A.String() != "192.0.2.9" {
			t.Fatalf("answer %v", resp.Answer)
		}
	}
	waitFor(t, "both DoQ queries counted", func() bool { return protoCount(s, "doq") == 2 })
	if n := protoCount(s, "dot") + protoCount(s, "udp") + protoCount(s, "tcp"); n != 0 {
		t.Errorf("%d queries counted under another proto", n)
	}
}

// A client outside dns.allow is refused at its first Initial packet: the
// refusal is counted by the admission hook, which runs before quic-go starts
// the TLS handshake, and no query reaches the serve path.
func TestDoQ_clientOutsideAllowIsRefusedBeforeTheHandshake(t *testing.T) {
	p := newTestPKI(t)
	st := state(answerA("192.0.2.9"))
	st.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	s, addr := startDoQServer(t, st, p)
	c := doqClient(t, p, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exchange(ctx, newQuery("a.example.", dns.TypeA)); err == nil {
		t.Fatal("a client outside dns.allow got an answer")
	}
	if s.TLSSnapshot().DoQ.RefusedNotAllowed == 0 {
		t.Error("no refusal counted at the first packet")
	}
	if n := protoCount(s, "doq"); n != 0 {
		t.Errorf("%d DoQ queries served to a refused client", n)
	}
}

// dialRawDoQ is a bare QUIC connection with ALPN doq, for sending what the
// DoQ client never would.
func dialRawDoQ(t *testing.T, p *testPKI, addr netip.AddrPort) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := quic.DialAddr(ctx, addr.String(), &tls.Config{
		RootCAs: p.ca.Pool(), ServerName: testServerName, NextProtos: []string{"doq"},
	}, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	return c
}

// RFC 9250 §4.2.1: a query whose message ID is not 0 is a protocol error,
// and the server closes the connection with DOQ_PROTOCOL_ERROR.
func TestDoQ_nonZeroMessageIDClosesWithProtocolError(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	c := dialRawDoQ(t, p, addr)
	st, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	q := newQuery("a.example.", dns.TypeA)
	q.Id = 7
	wire := mustPack(t, q)
	st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...))
	st.Close()
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(st)
	var ae *quic.ApplicationError
	if !errors.As(err, &ae) || ae.ErrorCode != doqProtocolError || !ae.Remote {
		t.Fatalf("stream read: %v; want the server's DOQ_PROTOCOL_ERROR", err)
	}
	if s.doq.protocolErrors.Load() != 1 || protoCount(s, "doq") != 0 {
		t.Errorf("protocol errors %d, doq queries %d; want 1 and 0", s.doq.protocolErrors.Load(), protoCount(s, "doq"))
	}
}

// A connection may hold at most maxConnQueries streams at once: QUIC's
// stream limit, which the peer cannot exceed (RFC 9000 §4.6).
func TestDoQ_streamsPerConnectionAreBounded(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	c := dialRawDoQ(t, p, addr)
	for i := range maxConnQueries {
		if _, err := c.OpenStream(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if _, err := c.OpenStream(); err == nil {
		t.Fatalf("stream %d opened past the limit of %d", maxConnQueries+1, maxConnQueries)
	}
}

// One client holds at most tcpClientShare DoQ connections; the next is
// closed with DOQ_EXCESSIVE_LOAD and counted, and the earlier ones still
// answer.
func TestDoQ_connectionsPerClientAreBounded(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	var conns []*quic.Conn
	for range tcpClientShare {
		conns = append(conns, dialRawDoQ(t, p, addr))
	}
	// The server admits each after its handshake: wait until it holds all.
	key := clientKey(netip.MustParseAddr("127.0.0.1"))
	waitFor(t, "every connection admitted", func() bool {
		s.doq.conns.mu.Lock()
		defer s.doq.conns.mu.Unlock()
		return s.doq.conns.held[key] == tcpClientShare
	})
	extra := dialRawDoQ(t, p, addr)
	select {
	case <-extra.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection over the share stayed open")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(extra.Context()); !errors.As(err, &ae) || ae.ErrorCode != doqExcessiveLoad {
		t.Fatalf("closed with %v, want DOQ_EXCESSIVE_LOAD", err)
	}
	if got := s.TLSSnapshot().DoQ.RefusedShare; got != 1 {
		t.Errorf("client_share refusals %d, want 1", got)
	}
	st, err := conns[0].OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	q := newQuery("a.example.", dns.TypeA)
	q.Id = 0 // RFC 9250 §4.2.1
	wire := mustPack(t, q)
	st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...))
	st.Close()
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	if out, err := io.ReadAll(st); err != nil || len(out) < 2+12 {
		t.Fatalf("an admitted connection: %d bytes, %v", len(out), err)
	}
}

// RFC 9250 §4.2: a stream carries one query and then FIN; bytes after the
// message are a protocol error that ends the connection.
func TestDoQ_bytesAfterTheQueryCloseWithProtocolError(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	c := dialRawDoQ(t, p, addr)
	st, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	q := newQuery("a.example.", dns.TypeA)
	q.Id = 0
	wire := mustPack(t, q)
	st.Write(append(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...), 0xff))
	st.Close()
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(st)
	var ae *quic.ApplicationError
	if !errors.As(err, &ae) || ae.ErrorCode != doqProtocolError {
		t.Fatalf("stream read: %v; want DOQ_PROTOCOL_ERROR", err)
	}
	if protoCount(s, "doq") != 0 {
		t.Error("the malformed stream was answered")
	}
}

// A reload that drops an address closes its listener and connections; one
// that keeps it leaves it bound (the same socket, the same port).
func TestDoQ_listenReconciles(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	if err := s.ListenDoQ([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	if got := s.DoQAddrs(); len(got) != 1 || got[0].String() != addr.String() {
		t.Fatalf("after a reload with the same address: %v, want %s kept", got, addr)
	}
	c := dialRawDoQ(t, p, addr)
	// One query answered first: the server has accepted the connection and
	// holds it, so the removal below is what must close it (a handshake the
	// client finished may not yet be in the server's hands).
	st, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	q := newQuery("a.example.", dns.TypeA)
	q.Id = 0
	wire := mustPack(t, q)
	st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...))
	st.Close()
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(st); err != nil || len(b) < 2 {
		t.Fatalf("the query before the removal: %d bytes, %v", len(b), err)
	}
	if err := s.ListenDoQ(nil); err != nil {
		t.Fatal(err)
	}
	if got := s.DoQAddrs(); len(got) != 0 {
		t.Fatalf("after removing it: %v", got)
	}
	select {
	case <-c.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a connection of the removed listener stayed open")
	}
}
