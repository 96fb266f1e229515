package web

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// secretURL is a DoH upstream whose path carries an account token (docs/design.md#redaction):
// it must never reach /metrics, /api/health or a log line.
const (
	secretURL    = "https://127.0.0.1:8443/dns-query/SECRET-TOKEN"
	redactedDoH  = "https://127.0.0.1:8443"
	dotURL       = "tls://192.0.2.1:853"
	secretMarker = "SECRET-TOKEN"
)

// fakeUpstream is a callback-free fake Client for a real upstream.Pool. The
// first label of the query name picks its behaviour:
//
//	ok, recover  answer NOERROR at once; recover also counts one stale-
//	             connection recovery, as the DoT client would
//	fail         fail at once with a connection error (for DoH, net/http's
//	             *url.Error, which prints the full request URL)
//	stall        never answer: return an i/o timeout once ctx ends
//	hold         signal entered, then answer when release is closed (or
//	             fail once ctx ends)
//
// The probe question (". NS") answers NOERROR; tests here do not Start the
// pool, so only queries change health.
type fakeUpstream struct {
	url        string
	fails      atomic.Bool // when set, every behaviour but hold fails
	entered    chan string // hold queries, as they start
	release    chan struct{}
	recoveries atomic.Uint64
}

func newFake(rawURL string) *fakeUpstream {
	return &fakeUpstream{url: rawURL, entered: make(chan string, 8), release: make(chan struct{})}
}

func (f *fakeUpstream) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	behaviour := "ok"
	if labels := dns.SplitDomainName(m.Question[0].Name); len(labels) > 0 {
		behaviour = labels[0]
	}
	switch {
	case behaviour == "hold":
		f.entered <- m.Question[0].Name
		select {
		case <-f.release:
			return answer(m), nil
		case <-ctx.Done():
			return nil, ioTimeout
		}
	case behaviour == "stall":
		<-ctx.Done()
		return nil, ioTimeout
	case behaviour == "fail" || f.fails.Load():
		return nil, f.refused()
	case behaviour == "recover":
		f.recoveries.Add(1)
	}
	return answer(m), nil
}

func (f *fakeUpstream) Close() error { return nil }

// ReuseRecoveries makes the fake a reuse recoverer, as the DoT client is.
func (f *fakeUpstream) ReuseRecoveries() uint64 { return f.recoveries.Load() }

var _ upstream.Client = (*fakeUpstream)(nil)

var ioTimeout = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}

func (f *fakeUpstream) refused() error {
	err := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if strings.HasPrefix(f.url, "https://") {
		return &url.Error{Op: "Post", URL: f.url, Err: err}
	}
	return err
}

func answer(q *dns.Msg) *dns.Msg {
	r := new(dns.Msg).SetReply(q)
	r.RecursionAvailable = true
	if q.Question[0].Qtype == dns.TypeA {
		rr, _ := dns.NewRR(q.Question[0].Name + " 60 IN A 192.0.2.10")
		r.Answer = append(r.Answer, rr)
	}
	return r
}

// newPool is a real pool over fakes, in priority order, closed at cleanup.
// Slots is 1 so two held exchanges saturate it.
func newPool(t *testing.T, opts upstream.Options, fakes ...*fakeUpstream) *upstream.Pool {
	t.Helper()
	members := make([]upstream.Member, len(fakes))
	for i, f := range fakes {
		ep, err := upstream.ParseEndpoint(f.url, "", "")
		if err != nil {
			t.Fatal(err)
		}
		members[i] = upstream.Member{Endpoint: ep, Client: f, Priority: i}
	}
	if opts.Slots == 0 {
		opts.Slots = 1
	}
	p, err := upstream.New(opts, members)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func newQuery(name string) *dns.Msg { return new(dns.Msg).SetQuestion(name, dns.TypeA) }

// startWeb serves reg and health on 127.0.0.1:0 and shuts down at cleanup.
func startWeb(t *testing.T, reg prometheus.Gatherer, health func() Health, tweak ...func(*Server)) *Server {
	t.Helper()
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s := New("127.0.0.1:0", reg, health, nil)
	for _, f := range tweak {
		f(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("web shutdown: %v", err)
		}
	})
	return s
}

// get fetches path over real HTTP without keeping the connection alive (no
// client goroutine outlives the test) and returns the status and body.
func get(t *testing.T, s *Server, path string) (int, http.Header, []byte) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, "http://"+s.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain") // the text exposition format
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, body
}

// lockedBuffer collects log lines written from many goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLANResolver is a forward zone's resolver on 127.0.0.1, UDP and TCP on
// one port: over UDP "big." names come back truncated (TC=1), over TCP
// everything is answered. It returns host:port.
func startLANResolver(t *testing.T) string {
	t.Helper()
	var pc net.PacketConn
	var ln net.Listener
	for range 10 { // the TCP port may be taken by someone else; try another
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no port free for both UDP and TCP on 127.0.0.1")
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		r := answer(q)
		if w.RemoteAddr().Network() == "udp" && strings.HasPrefix(q.Question[0].Name, "big.") {
			r.Answer, r.Truncated = nil, true
		}
		w.WriteMsg(r)
	})
	serveDNS(t, &dns.Server{PacketConn: pc, Handler: h})
	serveDNS(t, &dns.Server{Listener: ln, Handler: h})
	return pc.LocalAddr().String()
}

// serveDNS runs srv until cleanup, waiting until it serves.
func serveDNS(t *testing.T, srv *dns.Server) {
	t.Helper()
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.ActivateAndServe(); err != nil {
			t.Errorf("fake resolver: %v", err)
		}
	})
	<-started
	t.Cleanup(func() {
		srv.Shutdown()
		wg.Wait()
	})
}

// startHangup is a TCP resolver that accepts and closes at once, on
// 127.0.0.1: every exchange with it fails on its account.
func startHangup(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			c.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
