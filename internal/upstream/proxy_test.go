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
// and a server cannot: go silent without closing (a black hole), or close one
// chosen connection among several.
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
	silent         atomic.Bool   // drop every byte, both ways, and keep both legs open
	clientGone     chan struct{} // closed when the client's leg ends
	once           sync.Once
}

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
		c.silent.Store(true)
	}
}

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
			c.pump(c.client, c.server)
			close(c.clientGone)
		})
		p.wg.Go(func() { c.pump(c.server, c.client) })
	}
}

// pump copies from src to dst until src fails, dropping bytes while the
// connection is silent. A failed leg ends both, unless the connection is
// silent: a black hole forwards no close either.
func (c *proxyConn) pump(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.silent.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				c.end()
				return
			}
		}
		if err != nil {
			if !c.silent.Load() {
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
