package web

import (
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/nxdns/nxdns/internal/query"
)

// connGuard is the web listener's admission (docs/design.md#robustness: the web
// endpoint survives idle keep-alive connections and slow clients). It
// replaces netutil.LimitListener, under which 32 idle keep-alive connections
// blocked every later client until their idle timeout ended.
//
// A client is an IPv4 address or an IPv6 /64 (query.ClientShareKey), as the
// DNS listeners count their shares: a host picks any address of its /64 at
// will, so counting IPv6 addresses one by one let four addresses of one /64
// hold every slot (issue 30 finding 13).
//
// Guarantees:
//   - at most maxConns connections are open, and at most maxConnsPerClient
//     from one client;
//   - the last newClientSlots of maxConns go only to clients holding no
//     connection: clients that already hold some, busy or not, cannot fill
//     the cap, so a new client always finds a slot unless newClientSlots new
//     clients hold one each;
//   - at a cap a new connection is not queued: the oldest idle keep-alive
//     connection in the cap's scope (that client's, or anyone's) is closed
//     to make room — an idle connection costs its client nothing to lose,
//     HTTP clients redial — and only when none is idle is the new connection
//     closed at once;
//   - so a host holding idle connections never keeps /metrics or
//     /api/health from another client, and a host holding busy ones (a slow
//     loris inside the header timeout) holds at most its share.
//
// States come from http.Server.ConnState; the count is released exactly
// once per connection, by its Close.
type connGuard struct {
	net.Listener

	mu        sync.Mutex // guards the fields below
	conns     map[*guardedConn]struct{}
	perClient map[netip.Prefix]int
}

// guardedConn is one admitted connection.
type guardedConn struct {
	net.Conn
	g      *connGuard
	client netip.Prefix // query.ClientShareKey
	once   sync.Once

	// Guarded by g.mu.
	idle      bool      // between requests on a keep-alive connection
	idleSince time.Time // when it became idle
}

func newConnGuard(ln net.Listener) *connGuard {
	return &connGuard{Listener: ln, conns: make(map[*guardedConn]struct{}), perClient: make(map[netip.Prefix]int)}
}

// Accept returns the next connection that fits, closing idle connections or
// refused newcomers on the way; it fails only when the listener does.
func (g *connGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if gc := g.admit(c); gc != nil {
			return gc, nil
		}
	}
}

func (g *connGuard) admit(c net.Conn) *guardedConn {
	// As the DNS path names it: fe80::1%eth0 is fe80::1, and 2001:db8::1 and
	// 2001:db8::2 are one /64.
	client := query.ClientShareKey(query.ClientOfNet(c.RemoteAddr()))
	g.mu.Lock()
	held := g.perClient[client]
	limit := maxConns
	if held > 0 {
		limit = maxConns - newClientSlots
	}
	var evict *guardedConn
	switch {
	case held >= maxConnsPerClient:
		evict = g.oldestIdle(func(o *guardedConn) bool { return o.client == client })
	case len(g.conns) >= limit:
		evict = g.oldestIdle(func(*guardedConn) bool { return true })
	}
	full := held >= maxConnsPerClient || len(g.conns) >= limit
	if full && evict == nil {
		g.mu.Unlock()
		c.Close()
		return nil
	}
	if evict != nil {
		g.forgetLocked(evict) // its slot is the newcomer's from now
	}
	gc := &guardedConn{Conn: c, g: g, client: client}
	g.conns[gc] = struct{}{}
	g.perClient[client]++
	g.mu.Unlock()
	if evict != nil {
		evict.Conn.Close() // outside the lock; already forgotten
	}
	return gc
}

// oldestIdle is the connection idle longest among those match accepts, or
// nil. Called with g.mu held; a linear scan over at most maxConns.
func (g *connGuard) oldestIdle(match func(*guardedConn) bool) *guardedConn {
	var best *guardedConn
	for c := range g.conns {
		if c.idle && match(c) && (best == nil || c.idleSince.Before(best.idleSince)) {
			best = c
		}
	}
	return best
}

// forgetLocked releases c's slot once. Called with g.mu held.
func (g *connGuard) forgetLocked(c *guardedConn) {
	c.once.Do(func() {
		delete(g.conns, c)
		if g.perClient[c.client]--; g.perClient[c.client] <= 0 {
			delete(g.perClient, c.client)
		}
	})
}

// guardConnState is the http.Server.ConnState hook of every listener: it
// passes the state to the guard that admitted the connection (an HTTPS
// connection is the guarded one inside its *tls.Conn).
func guardConnState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if gc, ok := c.(*guardedConn); ok {
		gc.g.connState(gc, st)
	}
}

// connState records which connections are idle keep-alives.
func (g *connGuard) connState(gc *guardedConn, st http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch st {
	case http.StateIdle:
		gc.idle, gc.idleSince = true, time.Now()
	case http.StateActive:
		gc.idle = false
	case http.StateClosed, http.StateHijacked:
		g.forgetLocked(gc)
	default: // StateNew: not idle yet
	}
}

func (c *guardedConn) Close() error {
	c.g.mu.Lock()
	c.g.forgetLocked(c)
	c.g.mu.Unlock()
	return c.Conn.Close()
}
