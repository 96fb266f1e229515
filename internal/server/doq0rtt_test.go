package server

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"

	"github.com/nxdns/nxdns/internal/pathemu"
	"github.com/nxdns/nxdns/internal/upstream"
)

// recordingConn is a UDP socket that keeps a copy of every datagram it
// sends: a client's first flight, to be replayed as an on-path attacker
// would. Only net.PacketConn's methods are promoted, so quic-go writes
// through WriteTo.
type recordingConn struct {
	net.PacketConn
	mu   sync.Mutex
	sent [][]byte
}

func (r *recordingConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	r.mu.Lock()
	r.sent = append(r.sent, append([]byte(nil), b...))
	r.mu.Unlock()
	return r.PacketConn.WriteTo(b, addr)
}

// The socket buffers, which quic-go sizes when it can.
func (r *recordingConn) SetReadBuffer(n int) error {
	return r.PacketConn.(*net.UDPConn).SetReadBuffer(n)
}
func (r *recordingConn) SetWriteBuffer(n int) error {
	return r.PacketConn.(*net.UDPConn).SetWriteBuffer(n)
}

func (r *recordingConn) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.sent
	r.sent = nil
	return out
}

// doqAsk writes one query (ID 0) on a new stream of c and returns the
// answer's rcode; opcode is the query's.
func doqAsk(t *testing.T, c *quic.Conn, name string, opcode int) int {
	t.Helper()
	st, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	q := newQuery(name, dns.TypeA)
	q.Id, q.Opcode = 0, opcode
	wire := mustPack(t, q)
	st.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(wire))), wire...))
	st.Close()
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	out, err := io.ReadAll(st)
	if err != nil || len(out) < 2+12 {
		t.Fatalf("%s: %d bytes, %v", name, len(out), err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(out[2:]); err != nil {
		t.Fatal(err)
	}
	return r.Rcode
}

// Served DoQ accepts 0-RTT for standard queries and holds every other
// opcode until the handshake completes (RFC 9250 §4.5; docs/server.md
// "0-RTT"). A client's resumed first flight carries a QUERY and an UPDATE in
// 0-RTT: both are answered, the UPDATE after the handshake. The same flight
// replayed to the server's second DoQ address (same certificate and ticket
// keys, so the ticket is accepted there too) costs one more answer to the
// QUERY and nothing for the UPDATE: the replayed connection never completes
// its handshake, so the UPDATE is never processed, and the connection ends
// at the handshake timeout and returns its share.
func TestDoQ_0RTTReplayAnswersTheQueryOnceMoreAndNeverTheUpdate(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.9")), p)
	if err := s.ListenDoQ(nil); err != nil { // builds the front's configuration
		t.Fatal(err)
	}
	s.doq.qconf.HandshakeIdleTimeout = 500 * time.Millisecond // the replayed handshake's end, sooner
	if err := s.ListenDoQ([]string{"127.0.0.1:0", "127.0.0.2:0"}); err != nil {
		t.Fatal(err)
	}
	addrs := s.DoQAddrs()
	tlsConf := &tls.Config{
		RootCAs: p.ca.Pool(), ServerName: testServerName, NextProtos: []string{"doq"},
		ClientSessionCache: tls.NewLRUClientSessionCache(1),
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingConn{PacketConn: udp}
	tr := &quic.Transport{Conn: rec}
	t.Cleanup(func() { tr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A first connection, for the session ticket.
	c1, err := tr.Dial(ctx, addrs[0], tlsConf, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	doqAsk(t, c1, "first.example.", dns.OpcodeQuery)
	waitFor(t, "a session ticket", func() bool { _, ok := tlsConf.ClientSessionCache.Get(testServerName); return ok })
	c1.CloseWithError(0, "")

	// The resumed connection: both queries go in 0-RTT. It crosses a path
	// of 100 ms, so that the client's handshake cannot complete before
	// the queries are written (on bare loopback it may, and they would go
	// in 1-RTT, which the replay cannot use).
	relay, err := pathemu.Start("127.0.0.1:0", addrs[0].String(), pathemu.Path{RTT: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	rec.take()
	c2, err := tr.DialEarly(ctx, net.UDPAddrFromAddrPort(relay.Addr), tlsConf, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var queryRcode, updateRcode int
	wg.Go(func() { queryRcode = doqAsk(t, c2, "early.example.", dns.OpcodeQuery) })
	wg.Go(func() { updateRcode = doqAsk(t, c2, "early.example.", dns.OpcodeUpdate) })
	wg.Wait()
	if !c2.ConnectionState().Used0RTT {
		t.Fatal("the server rejected 0-RTT")
	}
	if queryRcode != dns.RcodeSuccess || updateRcode != dns.RcodeNotImplemented {
		t.Errorf("rcodes %s, %s; want NOERROR for the QUERY, NOTIMP for the UPDATE after the handshake",
			dns.RcodeToString[queryRcode], dns.RcodeToString[updateRcode])
	}
	flight := rec.take()
	c2.CloseWithError(0, "")
	waitFor(t, "the three queries counted", func() bool { return protoCount(s, "doq") == 3 })

	// The replay, from another port, to the second address.
	attacker, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addrs[1].String()))
	for _, d := range flight {
		if _, err := attacker.WriteTo(d, to); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the replayed QUERY answered", func() bool { return protoCount(s, "doq") >= 4 })
	key := clientKey(netip.MustParseAddr("127.0.0.1"))
	waitFor(t, "the replayed connection's end at its handshake timeout", func() bool {
		s.doq.conns.mu.Lock()
		defer s.doq.conns.mu.Unlock()
		return s.doq.conns.held[key] == 0 && s.doq.handshakes.n.Load() == 0
	})
	if got := protoCount(s, "doq"); got != 4 {
		t.Errorf("%d DoQ queries served, want 4: the replayed UPDATE must never be processed", got)
	}
}

// nxdns's own DoQ upstream client against its served DoQ: after the server
// closes the connection, the client's next query goes in 0-RTT and the
// server accepts it (the client counts the dial as accepted), answered once.
// Across a 20 ms path: on bare loopback the server's first flight can be
// processed while the query's stream is being opened, which quic-go
// v0.65.0 does with a data race the race detector reports
// (docs/decisions/quic-library.md; see internal/upstream/doq.go).
func TestDoQ_ownClientResumesWith0RTTAccepted(t *testing.T) {
	p := newTestPKI(t)
	s, direct := startDoQServer(t, state(answerA("192.0.2.9")), p)
	relay, err := pathemu.Start("127.0.0.1:0", direct.String(), pathemu.Path{RTT: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	c := doqClient(t, p, relay.Addr).(*upstream.DoQ)
	ask := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.Exchange(ctx, newQuery(name, dns.TypeA)); err != nil {
			t.Fatal(err)
		}
	}
	ask("a.example.")
	// The server ends the connection. The client holds its ticket by now:
	// the server sends it when the handshake completes, before it has
	// read the query, let alone written the answer.
	s.doq.mu.Lock()
	l := s.doq.ls[0]
	s.doq.mu.Unlock()
	l.mu.Lock()
	for qc := range l.conns {
		qc.CloseWithError(doqNoError, "")
	}
	l.mu.Unlock()
	waitFor(t, "the client sees the close", func() bool {
		key := clientKey(netip.MustParseAddr("127.0.0.1"))
		s.doq.conns.mu.Lock()
		defer s.doq.conns.mu.Unlock()
		return s.doq.conns.held[key] == 0
	})
	ask("b.example.")
	waitFor(t, "the redial counted as 0-RTT accepted", func() bool { return c.Dials().ZeroRTTAccepted == 1 })
	waitFor(t, "both queries counted", func() bool { return protoCount(s, "doq") == 2 })
}
