// Package server answers the LAN's plain DNS (docs/design.md#stage-chain, docs/design.md#listeners): a UDP and a TCP
// listener for every configured address, the query handler (parse, access
// control, route, resolve, size the answer to the client), SERVFAIL answers
// with Extended DNS Errors (docs/design.md#pool-answers), one query-log line per query, and the
// counters the metrics collector reads at scrape time.
//
// The handler knows the upstream pool and the forward zones only through the
// Router and Resolver seams, so a reload swaps them (Swap) without touching a
// socket, and changes the listen addresses (Listen) without dropping the ones
// that stay.
package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/workers"
)

// Router picks the resolver for a query name: the forward zone with the
// longest matching suffix, or the pool. source names the choice for the
// query log and metrics ("pool", "zone:lan"). Route must return at once,
// compare names case-insensitively (clients may use 0x20 mixed case) and
// never return a nil Resolver.
type Router interface {
	Route(qname string) (r Resolver, source string)
}

// A PoolRouter is a Router that also has per-group pools (docs/filter.md
// "Per-group upstreams"): RouteIn routes a query whose Event.Pool names a
// group, as Route does, but with the group's own pool in place of the main
// one (forward zones stay the LAN's). A pool it does not know is the main
// pool's.
type PoolRouter interface {
	Router
	RouteIn(qname, pool string) (r Resolver, source string)
}

// An AnswerGuard refuses a pool's answer: Check returns the answer to send
// instead, and true, or false to let resp through. It must not modify q or
// resp.
type AnswerGuard interface {
	Check(q, resp *dns.Msg) (*dns.Msg, bool)
}

// State is everything a reload can change about answering a query. A State
// is read-only once handed to New or Swap.
type State struct {
	Router Router
	// Stages run between access control and the route, in order (docs/design.md#stage-chain:
	// local answers, policy, cache); nil for none.
	Stages []query.Stage
	// Sinks receive every finished query event besides the server's own
	// query log and counters (the history); nil for none.
	Sinks    []query.Sink
	Allow    []netip.Prefix // clients outside get REFUSED; empty refuses everyone (never an open resolver)
	Names    Names          // client display names for the query log; nil for none
	QueryLog bool           // one Info line per query on the "server.query" logger
	// Guard checks the pools' answers (not the forward zones') before
	// anything else sees them (docs/protocol.md "Rebinding protection");
	// nil checks nothing.
	Guard AnswerGuard
	// Limit is the per-device rate limit (docs/protocol.md "Rate limit");
	// nil limits nobody.
	Limit *RateLimiter
	// Budget is the answer deadline the stages see (query.Request.Deadline):
	// the pool's total budget. 0 means defaultBudget.
	Budget time.Duration

	// Devices names each query's device (docs/devices.md); when set it is
	// used instead of Names. nil for none.
	Devices Identifier
	// Trusted are the forwarders whose EDNS0 client MAC and client subnet
	// are believed (dns.trusted_forwarders; clientid.go).
	Trusted []netip.Prefix
	// ServedNames are the names the DoT certificate serves, under which an
	// SNI's first label is a ClientID (clientid.go); nil for none.
	ServedNames func() []string
}

// defaultBudget stands in for an unset State.Budget:
// the shipped total_timeout_ms of docs/design.md#config-budgets.
const defaultBudget = 4 * time.Second

func (st *State) budget() time.Duration {
	if st.Budget > 0 {
		return st.Budget
	}
	return defaultBudget
}

// Options are what New needs besides the State.
type Options struct {
	Logger *zap.Logger // named "server" here; query lines go to its child "query". nil discards.
	// StateDir is filter.state_dir: the first DoQ or DoH3 listener reads
	// (or creates) the stateless-reset secret there (QUICResetKeyFile,
	// resetkey.go), once for the Server's life. "": the QUIC listeners
	// send no stateless resets.
	StateDir string
}

// Listener bounds. Compiled, not configured: they protect a small appliance
// (a Raspberry Pi) from one client, and docs/design.md#listeners fixes the first two.
const (
	// maxUDPInFlight is how many UDP queries of one address family are
	// answered at once. docs/design.md#lesson-bursts: a household sends bursts of
	// hundreds (a phone waking up, a smart TV, a browser with many tabs), and
	// while a primary stalls each of its queries holds its place for up to
	// one attempt_timeout, so the cap must hold a stalled slot-full plus
	// several such bursts; 1024 does (the minimum of docs/design.md#listener-caps). Beyond it a
	// datagram is dropped and counted, and the client's own retry timer
	// recovers, which beats queueing work whose client may already have
	// given up.
	//
	// Memory it bounds: one query in flight holds its goroutine (a stack of
	// 8–32 KiB along the pool's call chain), the copied query and its answer
	// (a few hundred bytes each for ordinary queries), so about 32 KiB at
	// most, 32 MiB per family when full. A flood of maximum-size datagrams
	// adds up to 64 KiB of copied query each (96 MiB per family), still
	// within a Pi 3's 1 GiB.
	maxUDPInFlight = 1024
	// maxTCPConns is how many TCP connections of one address family are open
	// at once (docs/design.md#listener-caps: at least 256). Beyond it a connection is refused
	// (closed at once) and counted. Memory it bounds: an idle connection holds
	// its reader goroutine and a small read buffer (about 8 KiB); a busy one
	// adds up to maxConnQueries queries of at most maxTCPQuerySize each, with
	// their goroutines (about 36 KiB each), so about 0.6 MiB at most and
	// 150 MiB per family in the worst case of every connection pipelining
	// its full share, 2 MiB when they are idle.
	maxTCPConns = 256
	// maxConnQueries is how many queries of one TCP connection run at once
	// (RFC 7766 §6.2.1.1 pipelining). At the cap the reader stops reading,
	// and TCP flow control pushes back on the client instead of us buffering.
	maxConnQueries = 16
	// tcpIdleTimeout closes a connection on which no query has arrived for
	// this long (RFC 7766 §6.2.3: servers should close idle connections; a
	// few seconds is suggested, and clients reconnect cheaply on a LAN).
	tcpIdleTimeout = 10 * time.Second
	// tcpReadTimeout bounds the rest of a message once its length prefix has
	// arrived, so a client trickling bytes (slow or half-open) cannot hold a
	// connection slot indefinitely.
	tcpReadTimeout = 2 * time.Second
	// tcpWriteTimeout bounds writing one answer: a client that stops reading
	// (its window full, or gone without a FIN) is disconnected.
	tcpWriteTimeout = 5 * time.Second
	// maxTCPQuerySize is the largest query message read over TCP. A query is
	// one question plus an OPT record, well under 1 KiB even with cookies and
	// padding; the bound caps the memory one connection can pin
	// (maxConnQueries of them).
	maxTCPQuerySize = 4096
)

// Server is the DNS front end. Create it with New, bind with Listen, replace
// the State with Swap, stop with Shutdown.
type Server struct {
	log  *zap.Logger // "server"
	qlog *zap.Logger // "server.query"

	// ctx ends when Shutdown gives up waiting: every Resolve runs under it,
	// so cancelling it ends the queries still running (and they answer
	// nothing).
	ctx    context.Context
	cancel context.CancelFunc

	gen atomic.Pointer[generation] // the current State's; Swap replaces it

	mu        sync.Mutex             // guards the fields below
	listeners []*listener            // the current ones, in Listen order
	live      map[*listener]struct{} // every listener not yet closed, retiring ones included
	closed    bool                   // Shutdown began: Listen fails

	retiring sync.WaitGroup // goroutines closing removed listeners; Add only under mu, before closed

	tls tlsFront // DoT and DoH listeners, their certificate and counters (tlsfront.go)
	doq doqFront // DoQ listeners and their counters (doq.go)

	// The QUIC listeners' stateless-reset keys come from quicReset, read
	// from stateDir by the first listenQUIC; under mu. nil: none.
	stateDir     string
	quicReset    *QUICResetSecret
	quicResetSet bool

	udpCap   [numFamilies]capacity
	tcpCap   [numFamilies]capacity
	udpShare *clientShares // one client's share of udpCap
	tcpShare *clientShares // one client's share of tcpCap
	dohShare *clientShares // one client's DoH queries in flight (doh.go)
	stats    counters
	work     *workers.Workers // the goroutines the UDP queries run on

	// TCP bounds, fields so tests can shorten them (set before Listen).
	tcpIdle, tcpRead, tcpWrite time.Duration
}

// New returns a Server answering with st (not nil). It binds nothing until
// Listen.
func New(opts Options, st *State) *Server {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("server")
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		log:      log,
		qlog:     log.Named("query"),
		ctx:      ctx,
		cancel:   cancel,
		live:     make(map[*listener]struct{}),
		tcpIdle:  tcpIdleTimeout,
		tcpRead:  tcpReadTimeout,
		tcpWrite: tcpWriteTimeout,
		udpShare: newClientShares(udpClientShare),
		tcpShare: newClientShares(tcpClientShare),
		dohShare: newClientShares(dohClientShare),
		work:     workers.New(),

		stateDir: opts.StateDir,
	}
	for f := range numFamilies {
		s.udpCap[f].max = maxUDPInFlight
		s.tcpCap[f].max = maxTCPConns
	}
	s.gen.Store(newGeneration(st))
	s.stats.init()
	return s
}

// Listen makes the listeners match addrs (host:port each, a UDP and a TCP
// socket per address): addresses already bound are kept untouched, new ones
// are bound, and ones no longer listed stop reading at once and close once
// their in-flight queries have answered.
//
// All new addresses are bound before anything is removed: if one fails, the
// error names it, whatever was bound by this call is closed, and the running
// set is unchanged (a bad reload keeps serving). One consequence: replacing
// a wildcard address by a specific one on the same port ("0.0.0.0:53" →
// "192.168.1.2:53") fails while the wildcard is still bound; restart for that.
func (s *Server) Listen(addrs []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server: listen after shutdown")
	}
	next, fresh, gone, err := plan(s.listeners, addrs, bind) // tlsfront.go
	if err != nil {
		return err
	}
	for _, l := range gone {
		s.retire(l)
	}
	for _, l := range fresh {
		s.start(l)
	}
	s.listeners = next
	return nil
}

func seen(ls []*listener, addr string) bool {
	for _, l := range ls {
		if l.addr == addr {
			return true
		}
	}
	return false
}

// retire stops a listener that is no longer configured and closes it in the
// background once its queries have answered. Called with s.mu held.
func (s *Server) retire(l *listener) {
	l.stop()
	s.retiring.Go(func() {
		l.wg.Wait()
		l.closeSockets()
		s.mu.Lock()
		delete(s.live, l)
		s.mu.Unlock()
	})
}

// Shutdown stops accepting queries on every listener, lets the queries in
// flight answer until ctx ends, then cancels the rest (a cancelled query
// answers nothing) and waits for them to return. It closes every socket and
// returns ctx.Err() if it had to cancel. Listen fails afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.listeners = nil
	ls := make([]*listener, 0, len(s.live))
	for l := range s.live {
		ls = append(ls, l)
	}
	s.mu.Unlock()

	for _, l := range ls {
		l.stop()
	}
	s.stopDoQ()
	done := make(chan struct{})
	go func() { // owned here: Shutdown always waits for done below
		s.doq.wg.Wait()
		s.tls.doh3.wg.Wait()
		for _, l := range ls {
			l.wg.Wait()
		}
		s.retiring.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel()
		for _, l := range ls {
			l.abort() // a write stalled on a dead client must not outlast ctx
		}
		<-done
	}
	s.cancel()
	s.work.Stop() // every query has returned: the idle workers go
	s.work.Wait()
	for _, l := range ls {
		l.closeSockets()
	}
	return err
}

// Addrs returns the bound addresses of the current listeners, in Listen
// order (with port 0, the ports the kernel chose; UDP and TCP may differ).
func (s *Server) Addrs() (udp, tcp []net.Addr) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.listeners {
		udp = append(udp, l.udp.LocalAddr())
		tcp = append(tcp, l.tcp.Addr())
	}
	return udp, tcp
}
