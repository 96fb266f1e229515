package testutil

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/certs"
)

// dohMediaType is the DoH message type (RFC 8484 §6).
const dohMediaType = "application/dns-message"

// DoHServer is a loopback DNS-over-HTTPS server (RFC 8484 POST) speaking
// HTTP/2 only. It answers on every path, so a test may put a token in the
// URL's path.
type DoHServer struct {
	Addr netip.AddrPort // 127.0.0.1:port
	Name string         // the name on its certificate

	handler Handler
	srv     *httptest.Server
	quit    context.Context // ends at cleanup: stalled handlers give up
	faults  faults
	delay   atomic.Int64 // nanoseconds before each answer

	conns, requests, h2requests atomic.Int64
}

// StartDoH starts a DoH server on 127.0.0.1 whose certificate, issued by ca,
// carries name; h answers the queries. t.Cleanup stops it.
func StartDoH(t testing.TB, ca *certs.CA, name string, h Handler) *DoHServer {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatalf("issue %s: %v", name, err)
	}
	quit, stop := context.WithCancel(context.Background())
	s := &DoHServer{Name: name, handler: h, quit: quit}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.srv.EnableHTTP2 = true
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are the tests' point
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.StartTLS()
	s.Addr = s.srv.Listener.Addr().(*net.TCPAddr).AddrPort()
	t.Cleanup(func() {
		stop()
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
	return s
}

// URL is the server's URL with the given path ("/dns-query"), named by the
// certificate's name: a client must dial Addr, never resolve the name.
func (s *DoHServer) URL(path string) string {
	return "https://" + net.JoinHostPort(s.Name, strconv.Itoa(int(s.Addr.Port()))) + path
}

// Connections is the number of TCP connections accepted.
func (s *DoHServer) Connections() int { return int(s.conns.Load()) }

// Requests is the number of requests received, HTTP2Requests those over
// HTTP/2 (r.ProtoMajor == 2).
func (s *DoHServer) Requests() int      { return int(s.requests.Load()) }
func (s *DoHServer) HTTP2Requests() int { return int(s.h2requests.Load()) }

// SetDelay makes every later answer wait d (0: answer at once).
func (s *DoHServer) SetDelay(d time.Duration) { s.delay.Store(int64(d)) }

// FailNext makes the next request suffer f. Calls queue: each fault applies
// to one request, in order.
func (s *DoHServer) FailNext(f Fault) { s.faults.push(f) }

// CloseClientConnections closes every connection, busy or idle.
func (s *DoHServer) CloseClientConnections() { s.srv.CloseClientConnections() }

func (s *DoHServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.ProtoMajor == 2 {
		s.h2requests.Add(1)
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != dohMediaType {
		http.Error(w, "want POST "+dohMediaType, http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, dns.MaxMsgSize))
	if err != nil {
		return
	}
	q := new(dns.Msg)
	if err := q.Unpack(body); err != nil {
		http.Error(w, "not a DNS message", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.quit, cancel)() // cleanup ends stalled handlers
	f := s.faults.take()
	switch f {
	case FaultStatus500:
		http.Error(w, "upstream broke", http.StatusInternalServerError)
		return
	case FaultContentType:
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("not dns"))
		return
	case FaultOversized:
		w.Header().Set("Content-Type", dohMediaType)
		w.Write(make([]byte, dns.MaxMsgSize+1024))
		return
	default: // no fault, or one applied to the answer (mangle)
	}
	if d := time.Duration(s.delay.Load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
	resp := s.handler(ctx, q)
	if resp == nil {
		<-ctx.Done() // a stall: the client or the cleanup ends it
		return
	}
	mangle(resp, f)
	wire, err := resp.Pack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", dohMediaType)
	w.Write(wire)
}
