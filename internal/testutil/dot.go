package testutil

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
)

// upstream is a fake upstream with one listener and Hooks: the one
// implementation behind DoTServer and DoHServer (internal/fakeup), so the
// transport tests and the scenario tests share every behaviour, hostile ones
// included.
type upstream struct {
	srv   *fakeup.Server
	hooks *fakeup.Hooks
	key   string
}

// startUpstream starts a fakeup listener for listenURL (port 0 on
// 127.0.0.1) whose certificate, issued by ca, carries name; h answers.
// t.Cleanup stops it and waits for every goroutine it started.
func startUpstream(t testing.TB, ca *certs.CA, name, listenURL string, h Handler, anyPath bool) (upstream, netip.AddrPort) {
	t.Helper()
	l, err := fakeup.ParseListen(listenURL)
	if err != nil {
		t.Fatalf("listen %s: %v", listenURL, err)
	}
	hooks := &fakeup.Hooks{Answer: h, AnyPath: anyPath}
	l.Hooks = hooks
	srv, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca, CertNames: []string{name}})
	if err != nil {
		t.Fatalf("start %s: %v", listenURL, err)
	}
	t.Cleanup(func() { srv.Close() })
	b := srv.Listeners()[0]
	return upstream{srv: srv, hooks: hooks, key: b.Key}, b.Addr.(*net.TCPAddr).AddrPort()
}

func (u upstream) counts() fakeup.Counts { return u.srv.Counters().PerListener[u.key] }

// SetDelay makes every later answer wait d (0: answer at once).
func (u upstream) SetDelay(d time.Duration) { u.hooks.SetDelay(d) }

// FailNext makes the next query read, on any connection, suffer f. Calls
// queue: each fault applies to one query, in order.
func (u upstream) FailNext(f Fault) { u.hooks.FailNext(f) }

// DoTServer is a loopback DNS-over-TLS server (RFC 7858). It answers the
// queries pipelined on a connection concurrently, each in its own goroutine,
// so a delayed answer delays only its own query — unlike miekg/dns's server,
// which works through one connection's queries in order.
type DoTServer struct {
	upstream
	Addr netip.AddrPort // 127.0.0.1:port
	Name string         // the name on its certificate
}

// StartDoT starts a DoT server on 127.0.0.1 whose certificate, issued by ca,
// carries name; h answers the queries. t.Cleanup stops it and waits for
// every goroutine it started.
func StartDoT(t testing.TB, ca *certs.CA, name string, h Handler) *DoTServer {
	t.Helper()
	return StartDoTWith(t, ca, name, "", h)
}

// StartDoTWith is StartDoT with fakeup behaviours given as a listen URL
// query ("ede_text=65000&tsig=1", "tc=1", "slow_bytes=10ms"; see
// docs/reference/tools.md), for the hostile-upstream tests.
func StartDoTWith(t testing.TB, ca *certs.CA, name, behaviour string, h Handler) *DoTServer {
	t.Helper()
	u, addr := startUpstream(t, ca, name, "dot://127.0.0.1:0?"+behaviour, h, false)
	return &DoTServer{upstream: u, Addr: addr, Name: name}
}

// Accepts is the number of TCP connections accepted.
func (s *DoTServer) Accepts() int { return int(s.counts().Connections) }

// Handshakes is the number of TLS handshakes completed.
func (s *DoTServer) Handshakes() int { return int(s.counts().Handshakes) }

// Resumed is the number of completed handshakes that resumed a session.
func (s *DoTServer) Resumed() int { return int(s.counts().Resumed) }

// Queries is the number of queries read, answered or not.
func (s *DoTServer) Queries() int { return int(s.counts().Queries) }

// CloseIdle closes every connection with no query in progress, as an
// upstream enforcing an idle timeout does, and returns how many it closed.
func (s *DoTServer) CloseIdle() int { return s.srv.CloseIdle() }
