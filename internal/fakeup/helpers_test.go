package fakeup

import (
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/certs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ioBound caps every client-side wait in these tests: far above any shaped
// delay, so only a broken server reaches it.
const ioBound = 5 * time.Second

type testServer struct {
	*Server
	ca *certs.CA
}

// start runs a fake upstream on the given listen URLs with a fresh CA, closed
// at cleanup. cfg's Listen and CA are filled in.
func start(t testing.TB, cfg Config, urls ...string) testServer {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range urls {
		l, err := ParseListen(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen = append(cfg.Listen, l)
	}
	cfg.CA = ca
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return testServer{Server: s, ca: ca}
}

func (s testServer) addr(i int) string { return s.Listeners()[i].Addr.String() }

func (s testServer) counts(i int) Counts {
	return s.Counters().PerListener[s.Listeners()[i].Key]
}

// dialTLS connects to a DoT listener, verifying the leaf against the test CA
// under the name "localhost".
func (s testServer) dialTLS(t testing.TB, i int) *tls.Conn {
	t.Helper()
	d := &net.Dialer{Timeout: ioBound}
	c, err := tls.DialWithDialer(d, "tcp", s.addr(i), &tls.Config{RootCAs: s.ca.Pool(), ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialTCP(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	return m
}

// writeMsg sends one length-prefixed message on a stream.
func writeMsg(t testing.TB, c net.Conn, m *dns.Msg) {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
	if _, err := c.Write(append(out, b...)); err != nil {
		t.Fatal(err)
	}
}

// readMsg reads one length-prefixed message, waiting at most d.
func readMsg(c net.Conn, d time.Duration) (*dns.Msg, error) {
	c.SetReadDeadline(time.Now().Add(d))
	var hdr [2]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint16(hdr[:]))
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	return m, m.Unpack(buf)
}

func mustRead(t testing.TB, c net.Conn) *dns.Msg {
	t.Helper()
	m, err := readMsg(c, ioBound)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// exchangeUDP sends m from a fresh socket and waits up to d for the reply.
func exchangeUDP(t testing.TB, addr string, m *dns.Msg, d time.Duration) (*dns.Msg, error) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, dns.MaxMsgSize)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	r := new(dns.Msg)
	return r, r.Unpack(buf[:n])
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// pipeClient multiplexes exchanges on one stream connection by message ID,
// as a pipelining DoT client does: one reader, one writer lock.
type pipeClient struct {
	conn    net.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	waiting map[uint16]chan *dns.Msg
	next    uint16
	done    chan struct{}
}

func newPipeClient(conn net.Conn) *pipeClient {
	p := &pipeClient{conn: conn, waiting: make(map[uint16]chan *dns.Msg), done: make(chan struct{})}
	go p.readLoop()
	return p
}

func (p *pipeClient) readLoop() {
	defer close(p.done)
	for {
		m, err := readMsg(p.conn, time.Hour)
		if err != nil {
			return
		}
		p.mu.Lock()
		ch := p.waiting[m.Id]
		delete(p.waiting, m.Id)
		p.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

func (p *pipeClient) exchange(m *dns.Msg) (*dns.Msg, error) {
	ch := make(chan *dns.Msg, 1)
	p.mu.Lock()
	p.next++
	m.Id = p.next
	p.waiting[m.Id] = ch
	p.mu.Unlock()
	b, err := m.Pack()
	if err != nil {
		return nil, err
	}
	out := binary.BigEndian.AppendUint16(nil, uint16(len(b)))
	p.wmu.Lock()
	_, err = p.conn.Write(append(out, b...))
	p.wmu.Unlock()
	if err != nil {
		return nil, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-p.done:
		return nil, io.EOF
	case <-time.After(ioBound):
		return nil, errTimeout
	}
}

func (p *pipeClient) close() {
	p.conn.Close()
	<-p.done
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "test client timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var errTimeout net.Error = timeoutErr{}
