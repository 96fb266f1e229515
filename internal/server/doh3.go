package server

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/nxdns/nxdns/internal/query"
)

// Serving DoH over HTTP/3 (RFC 8484 over RFC 9114; docs/server.md "DoH over
// HTTP/3") on tls.doh3_listen. The QUIC side is DoQ's (doq.go): one UDP
// socket and quic-go listener per address, behind the DoT/DoH certificate
// source (a renewal reaches new handshakes), dns.allow checked at the
// client's first Initial packet before any TLS work, a client's connections
// capped at its share (tcpClientShare, counted apart from DoQ's), and the
// same stream and amplification limits. An admitted connection is handed to
// one http3.Server whose handler is DoH/2's own (serveDoH): the same paths,
// methods, errors, per-client share of queries in flight and answers; its
// queries log proto h3. While doh3_listen is set the DoH/2 answers carry an
// Alt-Svc header naming its port (RFC 7838), so browsers that reached DoH
// over TCP learn they may use HTTP/3. No 0-RTT, unlike DoQ: HTTP/3 would
// need RFC 8470's Early-Data handling to tell which requests are safe, and
// doh3QUICConfig copies doqQUICConfig, whose Allow0RTT is false.

// doh3QUICConfig is every DoH3 connection's QUIC configuration: DoQ's
// bounds, with the few unidirectional streams HTTP/3 needs (the client's
// control and QPACK streams, RFC 9114 §6.2, and room for the reserved
// types a client may add), where DoQ allows none.
var doh3QUICConfig = func() *quic.Config {
	c := doqQUICConfig.Clone()
	c.MaxIncomingUniStreams = 8
	return c
}()

// ListenDoH3 makes the DoH3 listeners match addrs (IP:port each), as
// ListenDoQ does: kept addresses stay, new ones are bound before any is
// removed, and a failure changes nothing. It needs the certificate ListenTLS
// was given. The DoH/2 listeners advertise the first address's port in
// Alt-Svc from now on, or nothing when addrs is empty.
func (s *Server) ListenDoH3(addrs []string) error {
	err := s.listenQUIC(&s.tls.doh3, "DoH3", addrs, func(d *doqFront) {
		d.conf = s.tlsConfig(http3.NextProtoH3) // RFC 9114 §3.1
		d.qconf = doh3QUICConfig
		d.noError = quic.ApplicationErrorCode(http3.ErrCodeNoError)
		d.excessiveLoad = quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad)
		s.tls.h3 = &http3.Server{
			Handler:        http.HandlerFunc(s.serveDoH3),
			MaxHeaderBytes: dohMaxHeaderBytes,
			IdleTimeout:    dohIdleTimeout,
		}
		d.serve = s.serveDoH3Conn
	})
	if err != nil {
		return err
	}
	s.tls.altSvc.Store(altSvc(s.tls.doh3.addrs()))
	return nil
}

// serveDoH3 is serveDoH with DoH/2's time bounds, which http3.Server
// lacks: the body read and the answer written within doh3RequestTimeout
// (ReadTimeout and WriteTimeout on DoH/2). A client that keeps its
// connection alive with PINGs never lets QUIC's idle timeout end a stream
// whose body it stalled.
func (s *Server) serveDoH3(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	end := time.Now().Add(doh3RequestTimeout)
	rc.SetReadDeadline(end)
	rc.SetWriteDeadline(end)
	s.serveDoH(w, r)
}

// altSvc is the Alt-Svc value for the bound DoH3 addresses (RFC 7838 §3):
// the first one's port on the same host, for a day; nil for none.
func altSvc(bound []net.Addr) *string {
	if len(bound) == 0 {
		return nil
	}
	ua, ok := bound[0].(*net.UDPAddr)
	if !ok {
		return nil
	}
	v := `h3=":` + strconv.Itoa(ua.Port) + `"; ma=86400`
	return &v
}

// serveDoH3Conn serves one admitted connection until it ends; its requests
// reach serveDoH. It runs http3's stream loop itself (RawServerConn) for one
// bound http3.Server lacks, DoH/2's ReadHeaderTimeout: a request stream has
// doh3RequestTimeout from its opening to send its HEADERS, and is then reset
// with H3_REQUEST_INCOMPLETE. Without it a stream that never sends them is
// held until the connection ends, which a client's PINGs put off for ever,
// and its connection's 16 streams and the client's share with it. Once the
// headers are in, serveDoH3 sets the body's own deadline.
func (s *Server) serveDoH3Conn(c *quic.Conn, _ netip.Addr) {
	defer c.CloseWithError(s.tls.doh3.noError, "")
	hc, err := s.tls.h3.NewRawServerConn(c) // opens the control stream with SETTINGS
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for {
			st, err := c.AcceptUniStream(context.Background())
			if err != nil {
				return // the connection ended
			}
			wg.Go(func() { hc.HandleUnidirectionalStream(st) })
		}
	})
	for {
		st, err := c.AcceptStream(context.Background())
		if err != nil {
			return // the connection ended
		}
		st.SetReadDeadline(time.Now().Add(doh3RequestTimeout))
		wg.Go(func() { hc.HandleRequestStream(st) })
	}
}

// dohProto is the transport a DoH request arrived on: HTTP/3 or not.
func dohProto(r *http.Request) query.Proto {
	if r.ProtoMajor == 3 {
		return query.DoH3
	}
	return query.DoH
}

// advertiseH3 adds the Alt-Svc header to a DoH answer over HTTP/1.1 or
// HTTP/2 while DoH3 is served.
func (s *Server) advertiseH3(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor < 3 {
		if v := s.tls.altSvc.Load(); v != nil {
			w.Header().Set("Alt-Svc", *v)
		}
	}
}

// DoH3Addrs returns the bound UDP addresses of the current DoH3 listeners,
// in ListenDoH3 order.
func (s *Server) DoH3Addrs() []net.Addr { return s.tls.doh3.addrs() }

// doh3RequestTimeout bounds reading a DoH3 request's body and writing its
// answer, as dohRequestTimeout does on DoH/2; tests lower it.
var doh3RequestTimeout = dohRequestTimeout
