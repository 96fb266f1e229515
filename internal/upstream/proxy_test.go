package upstream

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tcpProxy is a loopback TCP proxy between a client under test and a test
// server. It does to the connections it carries what a network path can do
// and a server cannot: go silent without closing (a black hole), close one
// chosen connection among several, or hold a server's close back until the
// client's next query meets it.
type tcpProxy struct {
	Addr   netip.AddrPort // 127.0.0.1:port; dial this instead of the server
	target string

	ln      net.Listener
	wg      sync.WaitGroup
	mu      sync.Mutex // guards conns and closed
	conns   []*proxyConn
	closed  bool
	accepts atomic.Int64
}

// proxyConn is one client connection and its leg to the server.
type proxyConn struct {
	client, server net.Conn
	mode           atomic.Int32  // a proxyMode
	clientGone     chan struct{} // closed when the client's leg ends
	once           sync.Once
}

// proxyMode is what a connection does with the bytes and closes it carries.
type proxyMode int32

const (
	proxyForward proxyMode = iota // carry everything, a close included
	proxySilent                   // drop every byte both ways, carry no close
	proxyHold                     // drop the server's bytes and close; the client's next bytes close its leg
)

// startTCPProxy proxies 127.0.0.1:port to target, stopped at cleanup.
func startTCPProxy(t testing.TB, target netip.AddrPort) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &tcpProxy{Addr: ln.Addr().(*net.TCPAddr).AddrPort(), target: target.String(), ln: ln}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	return p
}

// Accepts is the number of client connections accepted.
func (p *tcpProxy) Accepts() int { return int(p.accepts.Load()) }

// conn is the i-th accepted connection (from 0).
func (p *tcpProxy) conn(t testing.TB, i int) *proxyConn {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if i >= len(p.conns) {
		t.Fatalf("proxy has %d connections, want connection %d", len(p.conns), i)
	}
	return p.conns[i]
}

// silence black-holes every connection open now: bytes are read and dropped
// both ways, nothing is closed. Later connections are carried normally.
func (p *tcpProxy) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.mode.Store(int32(proxySilent))
	}
}

// holdClose makes c keep the server's close from the client (and anything
// the server sends first, such as a TLS close_notify) until the client sends
// again: then the client's leg closes, its bytes unforwarded. It is the race
// of an upstream closing an idle connection just as a query is sent on it,
// made deterministic: the client cannot have noticed the close before it
// reused the connection.
func (c *proxyConn) holdClose() { c.mode.Store(int32(proxyHold)) }

// cut closes both legs of c at once, as an upstream closing the connection
// does.
func (c *proxyConn) cut() { c.end() }

// waitClientGone waits up to d for the client to close its leg of c and
// reports whether it did.
func (c *proxyConn) waitClientGone(d time.Duration) bool {
	select {
	case <-c.clientGone:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *tcpProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // the listener closed
		}
		p.accepts.Add(1)
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server, clientGone: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.wg.Go(func() {
			c.pump(c.client, c.server, true)
			close(c.clientGone)
		})
		p.wg.Go(func() { c.pump(c.server, c.client, false) })
	}
}

// pump copies from src to dst until src fails, as c's mode says: the
// client's leg when fromClient, else the server's.
func (c *proxyConn) pump(src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		mode := proxyMode(c.mode.Load())
		switch {
		case n == 0:
		case mode == proxyForward:
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.end()
				return
			}
		case mode == proxyHold && fromClient:
			c.end() // the held close meets the client's query
			return
		default: // dropped
		}
		if err != nil {
			if mode == proxyForward || (mode == proxyHold && fromClient) {
				c.end()
			}
			return
		}
	}
}

// end closes both legs.
func (c *proxyConn) end() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

func (p *tcpProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	for _, c := range conns {
		c.end()
	}
	p.wg.Wait()
}
