package fakeup

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"mime"
	"net"
	"net/http"
	"strconv"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/sleep"
)

// dnsMessage is the RFC 8484 §6 media type.
const dnsMessage = "application/dns-message"

// setupDoH builds the HTTP server for a doh listener. The listener's own
// accept loop does the TLS handshake (so handshake_delay and the handshake
// count work as for DoT) and hands finished *tls.Conn values to net/http,
// which sees the negotiated "h2" and serves HTTP/2.
func (l *listener) setupDoH() {
	mux := http.NewServeMux()
	path := l.Path
	if l.Hooks != nil && l.Hooks.AnyPath {
		path = "/"
	}
	mux.HandleFunc(path, l.serveDoH)
	l.handoff = &connQueue{ch: make(chan net.Conn), done: l.s.ctx.Done(), addr: l.ln.Addr()}
	l.doh = &http.Server{
		Handler:           mux,
		TLSConfig:         l.tlsConf,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       l.Behaviour.IdleClose, // HTTP/2 honours it with a GOAWAY and close
		MaxHeaderBytes:    16 << 10,
		// Clients that go away mid-request are the point of this tool, not
		// news: net/http's per-connection complaints would drown the log.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

// handOff completes the TLS handshake of an accepted connection and gives it
// to the HTTP server, or closes it if the server is closing.
func (l *listener) handOff(c net.Conn) {
	tc := l.handshake(c)
	if tc == nil {
		return
	}
	select {
	case l.handoff.ch <- tc:
	case <-l.s.ctx.Done():
		tc.Close()
	}
}

// serveDoH answers one RFC 8484 request: POST with a dns-message body, or GET
// with the message in the base64url "dns" parameter (§4.1).
func (l *listener) serveDoH(w http.ResponseWriter, r *http.Request) {
	l.counters.requests.Add(1)
	if r.ProtoMajor == 2 {
		l.counters.h2requests.Add(1)
	}
	buf, status := readDoH(r, w)
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	l.counters.queries.Add(1)
	q := new(dns.Msg)
	if err := q.Unpack(buf); err != nil || q.Response {
		http.Error(w, "not a DNS query", http.StatusBadRequest)
		return
	}
	// The request ends when the client resets the stream or the server
	// closes, whichever is first.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(l.s.ctx, cancel)()
	f := l.takeFault()
	switch f {
	case FaultStatus500:
		http.Error(w, "upstream broke", http.StatusInternalServerError)
		return
	case FaultContentType:
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("not dns"))
		return
	case FaultOversized:
		w.Header().Set("Content-Type", dnsMessage)
		w.Write(make([]byte, dns.MaxMsgSize+1024))
		return
	default: // no fault, or one applied to the answer (mangle)
	}
	if l.Behaviour.Stall {
		l.counters.stalled.Add(1)
		<-ctx.Done()
		return
	}
	if !sleep.For(ctx, l.delay(q)+l.hookDelay()) {
		return
	}
	reply := l.answer(ctx, q, f)
	if reply == nil {
		<-ctx.Done() // a stall: the client or the server ends it
		return
	}
	out, err := reply.Pack()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", dnsMessage)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	// RFC 8484 §5.1: freshness no longer than the smallest TTL answered.
	w.Header().Set("Cache-Control", "max-age="+strconv.FormatUint(uint64(minTTL(reply)), 10))
	if _, err := w.Write(out); err == nil {
		l.counters.answered.Add(1)
	}
}

// readDoH extracts the DNS message from a request, or the HTTP status that
// says why it cannot.
func readDoH(r *http.Request, w http.ResponseWriter) ([]byte, int) {
	switch r.Method {
	case http.MethodPost:
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != dnsMessage {
			return nil, http.StatusUnsupportedMediaType
		}
		buf, err := io.ReadAll(http.MaxBytesReader(w, r.Body, dns.MaxMsgSize))
		if _, tooBig := errors.AsType[*http.MaxBytesError](err); tooBig {
			return nil, http.StatusRequestEntityTooLarge
		}
		if err != nil {
			return nil, http.StatusBadRequest
		}
		return buf, http.StatusOK
	case http.MethodGet:
		buf, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("dns"))
		if err != nil || len(buf) == 0 {
			return nil, http.StatusBadRequest
		}
		return buf, http.StatusOK
	}
	w.Header().Set("Allow", "GET, POST")
	return nil, http.StatusMethodNotAllowed
}

func minTTL(m *dns.Msg) uint32 {
	ttl := uint32(0)
	for i, rr := range m.Answer {
		if t := rr.Header().Ttl; i == 0 || t < ttl {
			ttl = t
		}
	}
	return ttl
}

// connQueue is the net.Listener net/http serves DoH from: connections whose
// TLS handshake is already done, handed over by the accept loop.
type connQueue struct {
	ch   chan net.Conn
	done <-chan struct{} // the server's: Accept fails once it closes
	addr net.Addr
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

// Close does nothing of its own: the queue ends with the server's context,
// and the accept loop closes the real socket.
func (q *connQueue) Close() error   { return nil }
func (q *connQueue) Addr() net.Addr { return q.addr }
