package server

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"

	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// handle is serve with the answer returned instead of sent: what the tests
// and benchmarks call to see the handler's wire answer.
func (s *Server) handle(ctx context.Context, wire []byte, client netip.Addr, proto query.Proto) []byte {
	var out []byte
	s.serve(ctx, wire, client, proto, func(b []byte) error { out = b; return nil })
	return out
}

// testUpstream is the attributed upstream the fake resolvers report.
const testUpstream = "tls://192.0.2.53:853"

// resolverFunc is a callback Resolver standing in for the pool or a zone,
// returning an answer and its upstream as a zone does: the upstream is the
// one tried, and a *upstream.QueryError says whom a failure tried and
// blames.
type resolverFunc func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error)

func (f resolverFunc) Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error) {
	m, up, err := f(ctx, q)
	res := upstream.Result{Msg: m, Upstream: up}
	if qe, ok := errors.AsType[*upstream.QueryError](err); ok {
		res.Tried = qe.Tried
		if up == "" {
			res.Upstream = qe.Attributed
		}
	} else if up != "" {
		res.Tried = []string{up}
	}
	return res, err
}

// routerFunc is a callback Router.
type routerFunc func(qname string) (Resolver, string)

func (f routerFunc) Route(qname string) (Resolver, string) { return f(qname) }

// pool routes every name to r as the pool.
func pool(r Resolver) Router {
	return routerFunc(func(string) (Resolver, string) { return r, "pool" })
}

type namesFunc func(netip.Addr) string

func (f namesFunc) Name(a netip.Addr) string { return f(a) }

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

// answerA answers every query with one A record.
func answerA(ip string) resolverFunc {
	return func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		return reply(q, aRecord(q.Question[0].Name, ip)), testUpstream, nil
	}
}

func reply(q *dns.Msg, rrs ...dns.RR) *dns.Msg {
	m := new(dns.Msg).SetReply(q)
	m.RecursionAvailable = true
	m.Answer = rrs
	return m
}

func aRecord(name, ip string) dns.RR {
	return &dns.A{
		Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
		A:   net.ParseIP(ip).To4(),
	}
}

// state is a State answering loopback clients through r, query log off.
func state(r Resolver) *State { return &State{Router: pool(r), Allow: loopback} }

// startServer serves st on 127.0.0.1 (UDP and TCP, kernel-chosen ports) and
// shuts down at cleanup. tweak, if given, runs before Listen.
func startServer(t *testing.T, st *State, tweak ...func(*Server)) *Server {
	t.Helper()
	s := New(Options{}, st)
	for _, f := range tweak {
		f(s)
	}
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return s
}

func udpAddr(s *Server) string { u, _ := s.Addrs(); return u[0].String() }
func tcpAddr(s *Server) string { _, t := s.Addrs(); return t[0].String() }

func newQuery(name string, qtype uint16) *dns.Msg { return new(dns.Msg).SetQuestion(name, qtype) }

func exchange(t *testing.T, network, addr string, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 10 * time.Second}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s exchange %s: %v", network, m.Question[0].Name, err)
	}
	return resp
}

// dialUDP is a raw UDP client; a connected socket only accepts datagrams
// from the server's address.
func dialUDP(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.UDPConn)
}

// dialUDPFrom is dialUDP from the loopback source address src (127.x.y.z:
// distinct hosts on one machine).
func dialUDPFrom(t *testing.T, src, addr string) *net.UDPConn {
	t.Helper()
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", &net.UDPAddr{IP: net.ParseIP(src)}, raddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dialTCPFrom is dialTCP from the loopback source address src.
func dialTCPFrom(t *testing.T, src, addr string) *dns.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &dns.Conn{Conn: c}
}

// dialTCP is a DNS-over-TCP client connection (miekg frames messages).
func dialTCP(t *testing.T, addr string) *dns.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &dns.Conn{Conn: c}
}

// readMsg reads one message from c within a generous bound.
func readMsg(t *testing.T, c *dns.Conn) *dns.Msg {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	m, err := c.ReadMsg()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return m
}

// readUDPMsg reads one datagram from c within a generous bound.
func readUDPMsg(t *testing.T, c *net.UDPConn) *dns.Msg {
	t.Helper()
	buf := make([]byte, 65535)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	return m
}

func mustPack(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor is testutil.WaitFor with the server tests' bound. It waits for a
// state the server reaches asynchronously (a counter, a gauge), never stands
// in for an ordering the test can observe directly.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 10*time.Second, cond)
}

// count returns the Snapshot's count for (source, rcode).
func count(snap Snapshot, source, rcode string) uint64 {
	for _, qc := range snap.Queries {
		if qc.Source == source && qc.Rcode == rcode {
			return qc.Count
		}
	}
	return 0
}

// edeOf returns the first Extended DNS Error of m, or nil.
func edeOf(m *dns.Msg) *dns.EDNS0_EDE {
	opt := m.IsEdns0()
	if opt == nil {
		return nil
	}
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_EDE); ok {
			return e
		}
	}
	return nil
}

// atomicMax tracks a running count and its peak in tests.
type atomicMax struct{ v atomic.Int64 }

func (a *atomicMax) add(d int64) { a.v.Add(d) }
func (a *atomicMax) load() int64 { return a.v.Load() }
func (a *atomicMax) observe(n int64) {
	for {
		cur := a.v.Load()
		if n <= cur || a.v.CompareAndSwap(cur, n) {
			return
		}
	}
}
