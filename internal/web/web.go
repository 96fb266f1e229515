// Package web serves nxdns's HTTP endpoints on web.listen (docs/design.md#metrics):
// /metrics for Prometheus and /api/health for people and monitors. Both
// only read state; nothing here changes how nxdns serves DNS, and health
// never drives a restart.
//
// The server is bounded so that a slow or hostile client cannot pin it or
// starve the DNS side of file descriptors: every phase of a request has a
// timeout, headers are small, connections are capped overall and per client
// (idle keep-alives make room rather than block, conns.go), and at most a few
// scrapes run at once.
package web

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// HTTP bounds. Compiled: the endpoints answer small GETs from Prometheus and
// curl, on a Raspberry Pi that must keep answering DNS.
const (
	// readHeaderTimeout closes a connection whose request headers have not
	// all arrived: a client that connects and sends nothing holds a
	// descriptor for this long at most.
	readHeaderTimeout = 5 * time.Second
	// readTimeout bounds reading the whole request; a GET has no body.
	readTimeout = 10 * time.Second
	// writeTimeout bounds a request from the end of its headers to the last
	// byte of the answer. It is above scrapeTimeout so that a scrape that
	// runs long still gets its 503 written.
	writeTimeout = 30 * time.Second
	// scrapeTimeout is how long a /metrics request may take before
	// promhttp answers 503; a Gather takes well under a millisecond.
	scrapeTimeout = 20 * time.Second
	// idleTimeout closes a kept-alive connection with no request: long
	// enough for Prometheus to reuse it across 15 s scrapes, short enough
	// that idle connections do not pile up (connGuard also closes the
	// oldest idle one when a cap is reached).
	idleTimeout = 20 * time.Second
	// maxHeaderBytes is far above what a scraper or browser sends.
	maxHeaderBytes = 8 << 10
	// maxConns caps open connections. The process shares its descriptor
	// limit with the DNS listeners: a client opening connections without end
	// must run into this cap, not make DNS fail for lack of descriptors.
	// At the cap the oldest idle connection makes room (connGuard).
	maxConns = 32
	// maxConnsPerClient is one client's share of maxConns (an IPv4 address
	// or an IPv6 /64): a browser opens up to 6 per host, Prometheus one; 8
	// lets a dashboard and a scraper share an address (loopback) and leaves
	// the other 24 to other hosts whatever one host does.
	maxConnsPerClient = 8
	// newClientSlots of maxConns are kept for clients that hold no
	// connection yet (conns.go): however many clients hold connections,
	// busy or slow, they fill at most maxConns-newClientSlots, leaving a way
	// in for the operator's browser or Prometheus.
	newClientSlots = 4
	// maxScrapes is how many /metrics requests run at once; more get 503.
	maxScrapes = 4
)

// Server is the HTTP server. Create it with New, bind with Start, stop with
// Shutdown.
type Server struct {
	addr string
	log  *zap.Logger
	srv  *http.Server

	// readHeaderTimeout is a field so tests can shorten it (set before Start).
	readHeaderTimeout time.Duration

	mux     *http.ServeMux        // every route; Handle adds the features' own before Start
	hosts   hostGuard             // in front of mux: the Host check against DNS rebinding (hosts.go)
	limited *limitEpisodes        // login rate limiting, logged per episode (limitlog.go)
	login   atomic.Pointer[login] // nil without web.password_file (auth.go)

	// tokens judges bearer tokens (tokenauth.go); nil refuses them. Set
	// before Start, read-only after.
	tokens *Tokens

	// tlsAddr and getCert serve the endpoint over HTTPS too (SetTLS,
	// web.tls_listen); set before Start, read-only after.
	tlsAddr string
	getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)

	mu        sync.Mutex // guards the fields below
	ln        net.Listener
	tlsLn     net.Listener
	hostnames []string // web.hostnames, for SetTLS to rebuild the Host policy
	started   bool
	closed    bool           // Shutdown began: Start fails
	routes    []string       // the patterns given to Handle (Routes)
	serving   sync.WaitGroup // the Serve goroutine
}

// New returns a server for addr (host:port) serving reg (not nil; usually
// metrics.New's registry) at /metrics and health() at /api/health. health is
// called once per request and must return at once; the composition root
// builds it from HealthFrom. log may be nil. It binds nothing until Start.
func New(addr string, reg prometheus.Gatherer, health func() Health, log *zap.Logger) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("web")
	// What net/http and promhttp report (an accept error such as running out
	// of descriptors, a series that failed to collect) needs an operator.
	errLog, err := zap.NewStdLogAt(log, zap.WarnLevel)
	if err != nil { // only for an invalid level
		errLog = zap.NewStdLog(log)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: errLog,
		// One series that fails to collect costs that series, not the whole
		// scrape: the other numbers are what an operator needs right then.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: maxScrapes,
		Timeout:             scrapeTimeout,
	}))
	mux.Handle("GET /api/health", healthHandler(health, log))
	s := &Server{addr: addr, log: log, mux: mux, readHeaderTimeout: readHeaderTimeout}
	s.hosts.next = mux
	s.limited = newLimitEpisodes(log)
	s.SetHostnames(nil)
	mux.HandleFunc("GET /login", s.handleLogin)
	mux.HandleFunc("POST /login", s.handleLogin)
	s.Handle("POST /logout", http.HandlerFunc(s.handleLogout), Mutating)
	s.srv = &http.Server{
		Handler:        &s.hosts,
		ReadTimeout:    readTimeout,
		WriteTimeout:   writeTimeout,
		IdleTimeout:    idleTimeout,
		MaxHeaderBytes: maxHeaderBytes,
		ErrorLog:       errLog,
	}
	return s
}

// Start binds the address and serves in the background. The error names
// the address. It fails if called twice or after Shutdown.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("web: %s: start after shutdown", s.addr)
	case s.started:
		return fmt.Errorf("web: %s: already started", s.addr)
	}
	if s.addr == "" {
		return errors.New("web: no listen address (web.listen is empty: do not start the web server)")
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("web: listen %s: %w", s.addr, err)
	}
	var tlsLn net.Listener
	if s.tlsAddr != "" {
		if tlsLn, err = net.Listen("tcp", s.tlsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("web: listen %s (web.tls_listen): %w", s.tlsAddr, err)
		}
	}
	s.started = true
	s.ln, s.tlsLn = ln, tlsLn
	s.srv.ReadHeaderTimeout = s.readHeaderTimeout
	s.srv.ConnState = guardConnState
	if tlsLn != nil { // before any Serve: Serve reads it
		// HTTP/1.1 only, and said so in the handshake. The connection
		// caps (conns.go) count connections as HTTP/1.1 uses them, one
		// request at a time; an HTTP/2 connection carries up to 250 at
		// once, past maxConnsPerClient. And with TLSConfig set before the
		// plain listener's Serve, the server offered h2 in the handshake
		// with no HTTP/2 server set up behind it: every browser (they all
		// pick h2) had its connection closed unanswered. A browser not
		// offered h2 speaks HTTP/1.1.
		s.srv.TLSConfig = &tls.Config{GetCertificate: s.getCert, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
		s.srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
	}
	guard := newConnGuard(ln)
	s.serving.Go(func() {
		if err := s.srv.Serve(guard); !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("web server stopped", zap.String("addr", ln.Addr().String()), zap.Error(err))
		}
	})
	s.log.Info("web server listening", zap.String("addr", ln.Addr().String()))
	if tlsLn != nil {
		// Its own connection caps: a LAN's HTTPS clients and loopback's
		// plain ones do not crowd each other out.
		tlsGuard := newConnGuard(tlsLn)
		s.serving.Go(func() {
			if err := s.srv.ServeTLS(tlsGuard, "", ""); !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("web server stopped", zap.String("addr", tlsLn.Addr().String()), zap.Error(err))
			}
		})
		s.log.Info("web server listening over HTTPS", zap.String("addr", tlsLn.Addr().String()))
	}
	return nil
}

// SetTLS makes Start serve the endpoint over HTTPS on addr too
// (web.tls_listen, docs/dashboard.md "HTTPS"), with the certificate getCert
// returns for each handshake — the [tls] pair, so a renewal is picked up
// without a restart. Call it before Handle and Start.
func (s *Server) SetTLS(addr string, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) {
	s.tlsAddr, s.getCert = addr, getCert
	s.mu.Lock()
	names := s.hostnames
	s.mu.Unlock()
	s.SetHostnames(names)
}

// TLSAddr is the bound HTTPS address; nil without SetTLS or before Start.
func (s *Server) TLSAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tlsLn == nil {
		return nil
	}
	return s.tlsLn.Addr()
}

// Addr is the bound address (with port 0, the port the kernel chose); nil
// before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting, lets requests in progress finish until ctx
// ends, then closes every connection. It returns ctx.Err() if it had to cut
// requests short. Safe to call without Start, and more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true // from here Start adds nothing to serving, so Wait is safe
	s.mu.Unlock()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close() // ctx ended first: cut what is left
	}
	s.serving.Wait()
	s.limited.close()
	return err
}
