package server

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"log"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/query"
)

// DoH (RFC 8484) on tls.doh_listen: net/http serves HTTP/2 and HTTP/1.1 on
// connections this file accepts, admits and handshakes itself, so the access
// list, the TCP cap and the handshake bound apply exactly as for DoT, and
// net/http only ever sees clients that may be served.
const (
	dohPath        = "/dns-query"
	dohContentType = "application/dns-message"
	// dohHeaderTimeout bounds a request's headers (a slow-loris client).
	dohHeaderTimeout = 5 * time.Second
	// dohRequestTimeout bounds reading a request's body and writing its
	// answer: the query budget (4 s by default) plus margin.
	dohRequestTimeout = 10 * time.Second
	// dohIdleTimeout closes a keep-alive connection without requests. Longer
	// than TCP's: browsers keep one DoH connection and send through it in
	// bursts, and a reconnect costs a handshake.
	dohIdleTimeout = 30 * time.Second
	// dohMaxHeaderBytes bounds a request's headers: a GET's dns parameter of
	// a maxTCPQuerySize query is under 6 KiB.
	dohMaxHeaderBytes = 16 << 10
	// dohStreamBuffer is the HTTP/2 receive window of one request stream and
	// dohConnBuffer of a connection: a query body is at most maxTCPQuerySize,
	// so the defaults (1 MiB each) would let one client pin memory for
	// nothing.
	dohStreamBuffer = 16 << 10
	dohConnBuffer   = maxConnQueries * dohStreamBuffer
)

// dohStatuses are the HTTP errors a DoH request can get, counted by status.
var dohStatuses = [...]int{
	http.StatusBadRequest,            // no or malformed dns parameter, not a DNS query
	http.StatusNotFound,              // a path other than /dns-query
	http.StatusMethodNotAllowed,      // neither GET nor POST
	http.StatusRequestEntityTooLarge, // a POST body over maxTCPQuerySize
	http.StatusRequestURITooLong,     // a GET dns parameter over maxTCPQuerySize
	http.StatusUnsupportedMediaType,  // a POST that is not application/dns-message
	http.StatusTooManyRequests,       // the client has dohClientShare queries in flight
	http.StatusServiceUnavailable,    // nothing to answer: the server is shutting down
}

// dohFront is one DoH listener's connection handling: an accepted, admitted
// and handshaken connection is handed to net/http through Accept, and its
// capacity unit is returned when net/http reports it closed.
type dohFront struct {
	s     *Server
	l     *listener
	srv   *http.Server
	ready chan net.Conn // handshaken connections waiting for Accept

	mu        sync.Mutex             // guards the maps
	handshook map[net.Conn]func()    // handed to net/http: their releases
	pending   map[*tls.Conn]struct{} // in their handshake
}

// startDoH runs a DoH listener: the TCP acceptor and net/http's Serve.
// Called with s.mu held.
func (s *Server) startDoH(l *listener) {
	d := &dohFront{
		s: s, l: l, ready: make(chan net.Conn),
		handshook: make(map[net.Conn]func()),
		pending:   make(map[*tls.Conn]struct{}),
	}
	d.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveDoH),
		TLSConfig:         s.tls.dohConf.Clone(), // its "h2" makes Serve set up HTTP/2 (and Serve writes to it: a copy)
		ReadHeaderTimeout: dohHeaderTimeout,
		ReadTimeout:       dohRequestTimeout,
		WriteTimeout:      dohRequestTimeout,
		IdleTimeout:       dohIdleTimeout,
		MaxHeaderBytes:    dohMaxHeaderBytes,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          maxConnQueries,
			MaxReceiveBufferPerStream:     dohStreamBuffer,
			MaxReceiveBufferPerConnection: dohConnBuffer,
		},
		ConnState: d.connState,
		// Requests run under the server's context: Shutdown's cancel ends
		// them like any other query (and a client leaving ends its own).
		BaseContext: func(net.Listener) context.Context { return s.ctx },
		// What net/http logs here is the clients' doing (an HTTP/2 protocol
		// error, a reset stream): counted where it matters, and at debug
		// level so a scanner cannot fill the journal.
		ErrorLog: dohErrorLog(s.log),
	}
	l.closeConns = d.abort
	s.live[l] = struct{}{}
	l.wg.Go(func() { s.acceptTCP(l, d.admit) })
	l.wg.Go(func() {
		d.srv.Serve(d) // returns once the listener stops (Accept)
		// Then close the connections gracefully: idle HTTP/1.1 ones at once,
		// HTTP/2 ones after a GOAWAY once their streams have answered.
		// Server.Shutdown's abort (closeConns) cuts what is left.
		d.srv.Shutdown(context.Background())
	})
}

func dohErrorLog(server *zap.Logger) *log.Logger {
	l, err := zap.NewStdLogAt(server.Named("doh"), zap.DebugLevel)
	if err != nil { // only for an invalid level
		return zap.NewStdLog(server.Named("doh"))
	}
	return l
}

// admit takes a connection under the access list and the cap, and
// handshakes it in its own goroutine.
func (d *dohFront) admit(l *listener, c *net.TCPConn) {
	fc := &d.s.tls.stats.doh
	_, release, ok := d.s.admitStream(c, fc)
	if !ok {
		return
	}
	tc := tls.Server(c, d.s.tls.dohConf)
	d.mu.Lock()
	d.pending[tc] = struct{}{}
	d.mu.Unlock()
	l.wg.Go(func() {
		err := d.s.handshake(l, tc, fc)
		d.mu.Lock()
		delete(d.pending, tc)
		if err == nil {
			d.handshook[tc] = release
		}
		d.mu.Unlock()
		if err != nil {
			tc.Close()
			release()
			return
		}
		select {
		case d.ready <- tc:
		case <-l.stopc:
			d.released(tc)
			tc.Close()
		}
	})
}

// Accept hands net/http the next handshaken connection; net.ErrClosed once
// the listener stops, which ends Serve.
func (d *dohFront) Accept() (net.Conn, error) {
	select {
	case c := <-d.ready:
		return c, nil
	case <-d.l.stopc:
		return nil, net.ErrClosed
	}
}

// Close does nothing: the listener's own stop closes the socket.
func (d *dohFront) Close() error { return nil }

// Addr is the bound address.
func (d *dohFront) Addr() net.Addr { return d.l.tcp.Addr() }

// connState returns a connection's capacity unit when net/http is done with it.
func (d *dohFront) connState(c net.Conn, st http.ConnState) {
	if st == http.StateClosed || st == http.StateHijacked {
		d.released(c)
	}
}

// released returns c's capacity unit, once.
func (d *dohFront) released(c net.Conn) {
	d.mu.Lock()
	release := d.handshook[c]
	delete(d.handshook, c)
	d.mu.Unlock()
	if release != nil {
		release()
	}
}

// abort cuts everything at once, after Shutdown gave up waiting: the
// connections net/http serves, and handshakes in progress.
func (d *dohFront) abort() {
	d.srv.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	for c := range d.pending {
		c.SetDeadline(longAgo)
	}
}

// serveDoH answers one DoH request (RFC 8484 §4): GET with the query in the
// base64url "dns" parameter, or POST with it as the body.
func (s *Server) serveDoH(w http.ResponseWriter, r *http.Request) {
	s.advertiseH3(w, r)
	clientID, ok, valid := dohClientID(r.URL.Path)
	if !ok {
		s.dohError(w, http.StatusNotFound, "not found: DNS queries go to "+dohPath)
		return
	}
	if !valid {
		s.badClientID(w)
		return
	}
	var wire []byte
	var status int
	switch r.Method {
	case http.MethodGet:
		wire, status = dohGET(r)
	case http.MethodPost:
		wire, status = dohPOST(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		s.dohError(w, http.StatusMethodNotAllowed, "DNS queries are GET ?dns= or POST (RFC 8484)")
		return
	}
	if status != 0 {
		s.dohError(w, status, dohReason(status))
		return
	}
	if !headerOK(wire) {
		s.stats.malformed.Add(1)
		s.dohError(w, http.StatusBadRequest, "not a DNS query")
		return
	}
	client := query.ClientOfRemote(r.RemoteAddr) // the TCP (or QUIC) peer, never a header
	key := clientKey(client)
	if !s.dohShare.tryAcquire(key) {
		s.dohError(w, http.StatusTooManyRequests, "too many queries in flight from this client")
		return
	}
	defer s.dohShare.release(key)
	answered := false
	// The query runs under the server's context, not the request's, and
	// holds its unit of the client's share until it returns: a reset
	// stream, or a closed connection, cancels the request's context at
	// once, while the exchange the query started goes on in the cache and
	// the upstream pool until it ends. Under the request's context a client
	// resetting every stream it opens would start exchanges without bound,
	// each stream's end freeing its place for the next (docs/server.md).
	// So a DoH query is counted as a TCP one is, until its work ends.
	s.serveAs(s.ctx, wire, client, dohProto(r), clientID, func(ans []byte) error {
		answered = true
		h := w.Header()
		h.Set("Content-Type", dohContentType)
		h.Set("Cache-Control", cacheControl(ans))
		h.Set("Content-Length", strconv.Itoa(len(ans)))
		_, err := w.Write(ans)
		return err
	})
	if !answered {
		s.dohError(w, http.StatusServiceUnavailable, "no answer")
	}
}

// dohGET decodes the dns parameter: base64url without padding (RFC 8484
// §4.1), padding tolerated since some clients send it.
func dohGET(r *http.Request) ([]byte, int) {
	param := r.URL.Query().Get("dns")
	switch {
	case param == "":
		return nil, http.StatusBadRequest
	case base64.RawURLEncoding.DecodedLen(len(param)) > maxTCPQuerySize+2:
		return nil, http.StatusRequestURITooLong
	}
	wire, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(param, "="))
	if err != nil || len(wire) > maxTCPQuerySize {
		return nil, http.StatusBadRequest
	}
	return wire, 0
}

// dohPOST reads the body of an application/dns-message POST, at most
// maxTCPQuerySize bytes.
func dohPOST(w http.ResponseWriter, r *http.Request) ([]byte, int) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != dohContentType {
		return nil, http.StatusUnsupportedMediaType
	}
	if r.ContentLength > maxTCPQuerySize {
		return nil, http.StatusRequestEntityTooLarge
	}
	wire, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTCPQuerySize))
	if err != nil {
		if _, tooLarge := err.(*http.MaxBytesError); tooLarge {
			return nil, http.StatusRequestEntityTooLarge
		}
		return nil, http.StatusBadRequest
	}
	return wire, 0
}

func dohReason(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "the dns parameter is missing or not base64url (RFC 8484 §4.1)"
	case http.StatusRequestURITooLong, http.StatusRequestEntityTooLarge:
		return "the query is larger than " + strconv.Itoa(maxTCPQuerySize) + " bytes"
	case http.StatusUnsupportedMediaType:
		return "POST bodies are " + dohContentType
	}
	return http.StatusText(status)
}

// dohError answers with an HTTP error and counts it by status.
func (s *Server) dohError(w http.ResponseWriter, status int, msg string) {
	for i, st := range dohStatuses {
		if st == status {
			s.tls.stats.dohStatus[i].Add(1)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, status)
}

// cacheControl is the answer's HTTP freshness (RFC 8484 §5.1): at most the
// smallest TTL of its records, a negative answer's SOA counting with the
// smaller of its TTL and MINIMUM (RFC 2308 §5). An answer with no record
// gets max-age=0; a failure (SERVFAIL, REFUSED, …) is not to be stored.
func cacheControl(ans []byte) string {
	var m dns.Msg
	if m.Unpack(ans) != nil {
		return "no-store"
	}
	if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
		return "no-store"
	}
	ttl := uint32(math.MaxUint32)
	for _, rr := range append(m.Answer[:len(m.Answer):len(m.Answer)], m.Ns...) {
		t := rr.Header().Ttl
		if soa, ok := rr.(*dns.SOA); ok {
			t = min(t, soa.Minttl)
		}
		ttl = min(ttl, t)
	}
	if ttl == math.MaxUint32 {
		ttl = 0
	}
	return "max-age=" + strconv.FormatUint(uint64(ttl), 10)
}
