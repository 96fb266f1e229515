package cache_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is the cache's clock in these tests: real time plus an offset the
// test moves forward, so TTLs expire at once while timers stay real.
type clock struct{ off atomic.Int64 }

func (c *clock) Now() time.Time                                  { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) Advance(d time.Duration)                         { c.off.Add(int64(d)) }
func (c *clock) AdvanceS(s int)                                  { c.Advance(time.Duration(s) * time.Second) }
func seconds(s int) time.Duration                                { return time.Duration(s) * time.Second }
func (r *rig) explain(name string, t uint16) []cache.Explanation { return r.cache.Explain(name, t) }

// answerer is a controllable upstream: a function of the query, swapped
// while the test runs; nil stalls (no answer).
type answerer struct {
	mu sync.Mutex
	f  func(q *dns.Msg) *dns.Msg
	n  map[string]int // queries seen, by lower-case name
}

func (a *answerer) set(f func(q *dns.Msg) *dns.Msg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.f = f
}

func (a *answerer) answer(q *dns.Msg) *dns.Msg {
	a.mu.Lock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[strings.ToLower(q.Question[0].Name)]++
	f := a.f
	a.mu.Unlock()
	if f == nil {
		return nil
	}
	return f(q)
}

func (a *answerer) asked(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[name]
}

// rig is nxdns's query path with the cache stage in it, for real: a DoT
// upstream on loopback behind a real pool, a forward zone "lan" whose UDP
// resolver is a loopback dns.Server, and the real server on loopback UDP and
// TCP. Only the cache's clock is the test's.
type rig struct {
	clock  *clock
	up     *answerer // the pool's DoT upstream
	lan    *answerer // the zone's resolver
	cache  *cache.Cache
	stage  *cache.Stage
	srv    *server.Server
	addr   string
	events chan *query.Event
	logs   *observer.ObservedLogs
	opts   cache.Options
	router router
	budget time.Duration
}

type rigOption func(*rig)

func withOptions(f func(*cache.Options)) rigOption { return func(r *rig) { f(&r.opts) } }
func withBudget(d time.Duration) rigOption         { return func(r *rig) { r.budget = d } }

func newRig(t *testing.T, opts ...rigOption) *rig {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	r := &rig{clock: &clock{}, up: &answerer{}, lan: &answerer{}, logs: logs,
		events: make(chan *query.Event, 1000), budget: 2 * time.Second}
	r.opts = cache.Options{Size: 1000, MaxTTL: seconds(86400), StaleMaxAge: seconds(86400),
		Prefetch: true, Logger: zap.New(core), Now: r.clock.Now}
	for _, o := range opts {
		o(r)
	}
	r.up.set(answerA("192.0.2.1", 60))
	r.lan.set(answerA("192.168.1.10", 60))

	ca := testutil.NewCA(t)
	dot := testutil.StartDoT(t, ca, "dot.test", func(_ context.Context, q *dns.Msg) *dns.Msg { return r.up.answer(q) })
	ep, err := upstream.ParseEndpoint("tls://"+dot.Addr.String(), "", "dot.test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := upstream.NewClient(ep, ca.PEM, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := upstream.New(upstream.Options{Attempt: r.budget, Total: r.budget}, []upstream.Member{{Endpoint: ep, Client: c}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })

	lanAddr := startUDP(t, r.lan)
	zones, err := forward.NewTable([]config.ForwardZone{{Zone: "lan", Resolver: "udp://" + lanAddr}}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	r.router = router{zones: zones, pool: pool}
	r.start(t)
	return r
}

// start builds the cache (loading its file, if any) and serves through it.
func (r *rig) start(t *testing.T) {
	t.Helper()
	r.cache = cache.New(r.opts)
	r.stage = r.cache.Stage()
	r.srv = server.New(server.Options{}, &server.State{
		Router: r.router, Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Budget: r.budget, Stages: []query.Stage{r.stage}, Sinks: []query.Sink{sink(r.events)},
	})
	if err := r.srv.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	udp, _ := r.srv.Addrs()
	r.addr = udp[0].String()
	t.Cleanup(func() { r.stop(t) })
}

// stop shuts the server and the cache down (saving its file); twice is once.
func (r *rig) stop(t *testing.T) {
	if r.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	r.stage.Close()
	if err := r.cache.Close(); err != nil {
		t.Errorf("cache close: %v", err)
	}
	r.srv = nil
}

type sink chan *query.Event

func (s sink) Record(e *query.Event) {
	c := *e // the event is the sink's only for the call
	select {
	case s <- &c:
	default:
	}
}

// event is the next finished query's event.
func (r *rig) event(t *testing.T) *query.Event {
	t.Helper()
	select {
	case e := <-r.events:
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no query event")
		return nil
	}
}

type router struct {
	zones *forward.Table
	pool  *upstream.Pool
}

func (rt router) Route(qname string) (server.Resolver, string) {
	if z, ok := rt.zones.Match(qname); ok {
		return z, query.ZonePrefix + strings.TrimSuffix(z.Name(), ".")
	}
	return rt.pool, query.SourcePool
}

// startUDP serves a on a loopback UDP dns.Server: the forward zone's router.
func startUDP(t *testing.T, a *answerer) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
			if m := a.answer(q); m != nil {
				_ = w.WriteMsg(m)
			}
		})}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// answerA answers every name with one A record of the given TTL.
func answerA(ip string, ttl uint32) func(*dns.Msg) *dns.Msg {
	return func(q *dns.Msg) *dns.Msg {
		m := new(dns.Msg).SetReply(q)
		m.RecursionAvailable = true
		m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA,
			Class: dns.ClassINET, Ttl: ttl}, A: net.ParseIP(ip).To4()}}
		return m
	}
}

// nxdomain answers NXDOMAIN, with an SOA of the given TTL and MINIMUM when
// soaTTL > 0.
func nxdomain(soaTTL, minimum uint32) func(*dns.Msg) *dns.Msg {
	return func(q *dns.Msg) *dns.Msg {
		m := new(dns.Msg).SetRcode(q, dns.RcodeNameError)
		m.RecursionAvailable = true
		if soaTTL > 0 {
			m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: soaTTL},
				Ns: "ns.example.", Mbox: "host.example.", Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: minimum}}
		}
		return m
	}
}

// holdUpstream makes the pool's upstream hold every query until unblock is
// called (at the latest when the test ends, so a failed test never hangs),
// then answer 192.0.2.1 with TTL 60.
func (r *rig) holdUpstream(t *testing.T) (unblock func()) {
	release := make(chan struct{})
	var once sync.Once
	unblock = func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	r.up.set(func(q *dns.Msg) *dns.Msg { <-release; return answerA("192.0.2.1", 60)(q) })
	return unblock
}

// nodataBehindCNAME answers NOERROR with a CNAME of the given TTL to a
// name without the type asked, and an SOA as nxdomain's.
func nodataBehindCNAME(cnameTTL, soaTTL, minimum uint32) func(*dns.Msg) *dns.Msg {
	return func(q *dns.Msg) *dns.Msg {
		m := nxdomain(soaTTL, minimum)(q)
		m.Rcode = dns.RcodeSuccess
		m.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeCNAME,
			Class: dns.ClassINET, Ttl: cnameTTL}, Target: "target.example."}}
		return m
	}
}

// ask sends one query over UDP to the server under test.
func (r *rig) ask(t *testing.T, m *dns.Msg) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 10 * time.Second}
	resp, _, err := c.Exchange(m, r.addr)
	if err != nil {
		t.Fatalf("query %s: %v", m.Question[0].Name, err)
	}
	return resp
}

// askA asks name's A record with EDNS (so EDEs can come back) and returns
// the answer and its event.
func (r *rig) askA(t *testing.T, name string) (*dns.Msg, *query.Event) {
	t.Helper()
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	resp := r.ask(t, m)
	return resp, r.event(t)
}

func ttlOf(t *testing.T, m *dns.Msg) uint32 {
	t.Helper()
	if len(m.Answer) == 0 {
		t.Fatalf("no answer records: %v", m)
	}
	return m.Answer[0].Header().Ttl
}

func edeOf(m *dns.Msg) *dns.EDNS0_EDE {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				return e
			}
		}
	}
	return nil
}
