package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

// doh3TestServer is a DoH server over HTTP/3 (quic-go's http3.Server) on
// loopback with a certificate from the test's CA. It counts QUIC
// connections and requests; mode makes it misbehave.
type doh3TestServer struct {
	Addr     netip.AddrPort
	h        testutil.Handler
	mode     atomic.Value // string: "" answers; "garbage" (200, dns-message, not DNS), "500", "type"
	accepts  atomic.Int64
	requests atomic.Int64
	badProto atomic.Int64 // requests not over HTTP/3, or not POSTs of a DNS message
}

func startDoH3TestServer(t testing.TB, ca *certs.CA, name string, h testutil.Handler) *doh3TestServer {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &doh3TestServer{Addr: udp.LocalAddr().(*net.UDPAddr).AddrPort(), h: h}
	s.mode.Store("")
	srv := &http3.Server{
		TLSConfig:  http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		QUICConfig: &quic.Config{MaxIdleTimeout: 10 * time.Second},
		Handler:    http.HandlerFunc(s.serveHTTP),
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			s.accepts.Add(1)
			return ctx
		},
	}
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(udp) })
	t.Cleanup(func() {
		srv.Close()
		udp.Close()
		wg.Wait()
		if n := s.badProto.Load(); n > 0 {
			t.Errorf("%d requests were not HTTP/3 POSTs of application/dns-message", n)
		}
	})
	return s
}

func (s *doh3TestServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if r.ProtoMajor != 3 || r.Method != http.MethodPost || r.Header.Get("Content-Type") != dohMediaType {
		s.badProto.Add(1)
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 65536))
	q := new(dns.Msg)
	if err := q.Unpack(body); err != nil {
		http.Error(w, "bad query", http.StatusBadRequest)
		return
	}
	switch s.mode.Load().(string) {
	case "garbage":
		w.Header().Set("Content-Type", dohMediaType)
		w.Write([]byte("this is not a DNS message at all"))
		return
	case "500":
		http.Error(w, "oops", http.StatusInternalServerError)
		return
	case "type":
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html></html>"))
		return
	}
	resp := s.h(r.Context(), q)
	if resp == nil {
		<-r.Context().Done()
		return
	}
	wire, _ := resp.Pack()
	w.Header().Set("Content-Type", dohMediaType)
	w.Write(wire)
}

// doh3TestSetup is a server for doh3.test and its client for
// h3://doh3.test:port/<token path>.
func doh3TestSetup(t *testing.T) (*doh3TestServer, *DoH3) {
	t.Helper()
	ca := testutil.NewCA(t)
	srv := startDoH3TestServer(t, ca, "doh3.test", testutil.AnswerA("192.0.2.3"))
	return srv, doh3TestClient(t, ca, srv, dohTestPath)
}

// doh3TestClient is a client for h3://doh3.test:port<path> dialing srv,
// closed at cleanup.
func doh3TestClient(t *testing.T, ca *certs.CA, srv *doh3TestServer, path string) *DoH3 {
	t.Helper()
	ep := transportEndpoint(t, fmt.Sprintf("h3://doh3.test:%d%s", srv.Addr.Port(), path), srv.Addr)
	c := NewDoH3(ep, ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDoH3_answersAndReusesOneConnection(t *testing.T) {
	srv, c := doh3TestSetup(t)
	transportMustExchange(t, c, "a.example.")
	transportMustExchange(t, c, "b.example.")
	if srv.accepts.Load() != 1 || srv.requests.Load() != 2 {
		t.Errorf("connections %d, requests %d; want 1, 2: one request stream per query on one connection",
			srv.accepts.Load(), srv.requests.Load())
	}
	if d := c.Dials(); d.New != 1 || d.Failed != 0 {
		t.Errorf("dials %+v, want one new", d)
	}
}

// A cold burst shares the one dial and then the one connection.
func TestDoH3_burstSharesOneConnection(t *testing.T) {
	srv, c := doh3TestSetup(t)
	dotTestBurst(t, c, 30, "burst")
	if srv.accepts.Load() != 1 || srv.requests.Load() != 30 {
		t.Errorf("connections %d, requests %d; want 1, 30", srv.accepts.Load(), srv.requests.Load())
	}
}

// A 200 whose body is not DNS, another status, another content type: each
// is the upstream's fault, of the kind DoH/2 gives it, and names no token;
// the connection stays for the next query.
func TestDoH3_badAnswersAreClassifiedPeerFaults(t *testing.T) {
	for _, tc := range []struct {
		mode string
		want Kind
	}{
		{"garbage", KindBadResponse},
		{"500", KindBadResponse},
		{"type", KindBadResponse},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			srv, c := doh3TestSetup(t)
			srv.mode.Store(tc.mode)
			_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
			transportWantKind(t, err, tc.want, c.ep.Redacted())
			if !errors.Is(err, ErrPeerFault) {
				t.Errorf("error %v is not a peer fault", err)
			}
			dohTestNoToken(t, err)
			srv.mode.Store("")
			transportMustExchange(t, c, "b.example.")
			if srv.accepts.Load() != 1 {
				t.Errorf("connections %d, want 1: a bad answer does not end the connection", srv.accepts.Load())
			}
		})
	}
}

func TestDoH3_certificateForAnotherNameNeverSendsTheQuery(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := startDoH3TestServer(t, ca, "other.test", testutil.AnswerA("192.0.2.3"))
	c := doh3TestClient(t, ca, srv, "/dns-query")
	_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
	transportWantKind(t, err, KindNetwork, c.ep.Redacted())
	if srv.requests.Load() != 0 {
		t.Errorf("server saw %d requests, want 0", srv.requests.Load())
	}
	if d := c.Dials(); d.Failed != 1 {
		t.Errorf("dials %+v, want one failed", d)
	}
}

// A handshake that never finishes (every datagram swallowed, as a network
// blocking UDP 443 does) costs the query its deadline and no more, and the
// failure is the attempt's expiry, not evidence of the upstream's.
func TestDoH3_handshakeThatNeverFinishesSpendsTheDeadline(t *testing.T) {
	addr := doqTestBlackHole(t)
	ep := transportEndpoint(t, fmt.Sprintf("h3://doh3.test:%d/dns-query", addr.Port()), addr)
	c := NewDoH3(ep, testutil.NewCA(t).Pool(), nil)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), 300*time.Millisecond, KindAttemptExpired)
	defer cancel()
	start := time.Now()
	_, err := c.Exchange(ctx, transportQuery("a.example."))
	transportWantKind(t, err, KindAttemptExpired, ep.Redacted())
	if err == nil || !strings.Contains(err.Error(), "QUIC handshake") {
		t.Errorf("error %v, want it to say the QUIC handshake did not finish", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("exchange took %v, want about its 300ms deadline", el)
	}
}

// A stalled answer ends at the query's deadline as the attempt's expiry;
// the connection serves the next query.
func TestDoH3_stalledAnswerEndsAtTheDeadline(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := startDoH3TestServer(t, ca, "doh3.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		if strings.HasPrefix(q.Question[0].Name, "stall.") {
			return nil
		}
		return testutil.AnswerA("192.0.2.3")(ctx, q)
	})
	c := doh3TestClient(t, ca, srv, "/dns-query")
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), 300*time.Millisecond, KindAttemptExpired)
	defer cancel()
	_, err := c.Exchange(ctx, transportQuery("stall.example."))
	transportWantKind(t, err, KindAttemptExpired, c.ep.Redacted())
	transportMustExchange(t, c, "b.example.")
	if srv.accepts.Load() != 1 {
		t.Errorf("connections %d, want 1", srv.accepts.Load())
	}
}

// Through the pool: NewClient builds a DoH3 for h3://, answers are
// attributed to the redacted h3:// URL, and health counts them.
func TestDoH3_throughThePool(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := startDoH3TestServer(t, ca, "doh3.test", testutil.AnswerA("192.0.2.3"))
	ep := transportEndpoint(t, fmt.Sprintf("h3://doh3.test:%d%s", srv.Addr.Port(), dohTestPath), srv.Addr)
	c, err := NewClient(ep, ca.PEM, nil)
	if err != nil {
		t.Fatalf("NewClient(h3://): %v", err)
	}
	if _, ok := c.(*DoH3); !ok {
		t.Fatalf("NewClient(h3://) is %T, want *DoH3", c)
	}
	p, err := New(Options{Attempt: 2 * time.Second, Total: 5 * time.Second}, []Member{{Endpoint: ep, Client: c}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for _, name := range []string{"a.example.", "b.example."} {
		resp, up, err := p.Resolve(transportCtx(t), transportQuery(name))
		if err != nil || len(resp.Answer) != 1 {
			t.Fatalf("resolve %s: %v, %v; want an answer", name, resp, err)
		}
		if up != ep.Redacted() || !strings.HasPrefix(up, "h3://") || strings.Contains(up, dohTestToken) {
			t.Errorf("attributed %q, want %q", up, ep.Redacted())
		}
	}
	srv.mode.Store("garbage")
	if _, _, err := p.Resolve(transportCtx(t), transportQuery("c.example.")); err == nil {
		t.Errorf("a garbage answer resolved")
	}
	u := p.Snapshot().Upstreams[0]
	if u.Successes != 2 || u.Failures != 1 || u.Dials.New != 1 || !strings.HasPrefix(u.URL, "h3://") {
		t.Errorf("url %q, successes %d, failures %d, dials %+v; want h3://…, 2, 1, one new",
			u.URL, u.Successes, u.Failures, u.Dials)
	}
}

func TestDoH3_closeFailsLaterExchangesAsCancelled(t *testing.T) {
	_, c := doh3TestSetup(t)
	transportMustExchange(t, c, "a.example.")
	c.Close()
	_, err := c.Exchange(transportCtx(t), transportQuery("b.example."))
	transportWantKind(t, err, KindCanceled, c.ep.Redacted())
}
