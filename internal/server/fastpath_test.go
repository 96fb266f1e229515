package server

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/wireform"
)

// gate is a stage before the cache that passes everything on until closed,
// then answers REFUSED itself — as a filter does once a name is blocked.
type gate struct{ closed atomic.Bool }

func (g *gate) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	if g.closed.Load() {
		r.Event.Source = query.SourceBlocked
		return new(dns.Msg).SetRcode(r.Msg, dns.RcodeRefused), nil
	}
	return next.Answer(ctx, r)
}

func (g *gate) Passes(*query.Event, []string) bool { return !g.closed.Load() }

// fastRig is a server whose chain is a gate and a cache on a clock the test
// moves, over an upstream that counts its questions.
type fastRig struct {
	s     *Server
	gate  *gate
	now   atomic.Int64 // the cache's clock, Unix ns
	asked atomic.Int64
	sink  *sinkRecorder
}

func newFastRig(t *testing.T, before ...query.Stage) *fastRig {
	t.Helper()
	r := &fastRig{gate: &gate{}, sink: &sinkRecorder{}}
	r.now.Store(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	c := cache.New(cache.Options{Size: 100, MaxTTL: 24 * time.Hour, Now: func() time.Time { return time.Unix(0, r.now.Load()) }})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	upstream := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		r.asked.Add(1)
		name := q.Question[0].Name
		m := reply(q,
			&dns.CNAME{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 300}, Target: "edge.example.net."},
			&dns.A{Hdr: dns.RR_Header{Name: "edge.example.net.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 600}, A: []byte{192, 0, 2, 7}},
		)
		// A validating resolver's AD: only to a query that set AD or DO
		// (RFC 6840 §5.8); nxdns asks with AD=1.
		m.AuthenticatedData = q.AuthenticatedData || q.IsEdns0() != nil && q.IsEdns0().Do()
		return m, "tls://upstream", nil
	})
	stages := append(append([]query.Stage{}, before...), r.gate, st)
	r.s = startServer(t, &State{Router: pool(upstream), Allow: loopback, Stages: stages, Sinks: []query.Sink{r.sink}})
	return r
}

// ask sends m over UDP and returns the answer and whether the fast path
// gave it (its counter moved, waited for as the event is recorded after
// the write).
func (r *fastRig) ask(t *testing.T, m *dns.Msg) (*dns.Msg, bool) {
	t.Helper()
	before := r.s.stats.fastAnswers.Load()
	events := len(r.sink.all())
	c := dialUDP(t, udpAddr(r.s))
	if _, err := c.Write(mustPack(t, m)); err != nil {
		t.Fatal(err)
	}
	ans := readUDPMsg(t, c)
	testutil.WaitFor(t, "the query's event", 2*time.Second, func() bool { return len(r.sink.all()) > events })
	return ans, r.s.stats.fastAnswers.Load() > before
}

func (r *fastRig) advance(d time.Duration) { r.now.Add(int64(d)) }

func shapes() map[string]func() *dns.Msg {
	q := func() *dns.Msg { return newQuery("www.example.com.", dns.TypeA) }
	return map[string]func() *dns.Msg{
		"no EDNS": q,
		"RD clear": func() *dns.Msg {
			m := q()
			m.RecursionDesired = false
			return m
		},
		"EDNS 1232": func() *dns.Msg { m := q(); m.SetEdns0(1232, false); return m },
		"EDNS 4096 with DO": func() *dns.Msg {
			m := q()
			m.SetEdns0(4096, true)
			return m
		},
		"CD and AD": func() *dns.Msg {
			m := q()
			m.CheckingDisabled, m.AuthenticatedData = true, true
			m.SetEdns0(1232, false)
			return m
		},
		"AD without EDNS": func() *dns.Msg {
			m := q()
			m.AuthenticatedData = true
			return m
		},
		"a cookie": func() *dns.Msg {
			m := q()
			m.SetEdns0(1232, false)
			m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0011223344556677"})
			return m
		},
	}
}

// sameAnswer fails unless a and b are the same answer but for their IDs.
func sameAnswer(t *testing.T, what string, a, b *dns.Msg) {
	t.Helper()
	x, y := a.Copy(), b.Copy()
	x.Id, y.Id = 0, 0
	if x.String() != y.String() {
		t.Fatalf("%s: the fast path sent\n%v\nthe general path\n%v", what, x, y)
	}
}

// The fast path's answer is the general path's, shape by shape, and counts
// down with the entry: asked again 100 s later, it equals what the general
// path (a mixed-case query, which the fast path leaves alone) sends then.
func TestFastPath_sendsWhatTheGeneralPathSends(t *testing.T) {
	for what, shape := range shapes() {
		t.Run(what, func(t *testing.T) {
			r := newFastRig(t)
			if _, fast := r.ask(t, shape()); fast {
				t.Fatal("a miss was answered by the fast path")
			}
			general, fast := r.ask(t, shape())
			if fast {
				t.Fatal("the first hit, before any template, was answered by the fast path")
			}
			quick, fast := r.ask(t, shape())
			if !fast {
				t.Fatal("the second hit took the general path")
			}
			sameAnswer(t, what, quick, general)
			m := shape()
			wantAD := m.AuthenticatedData || m.IsEdns0() != nil && m.IsEdns0().Do() // RFC 6840 §5.8
			if quick.AuthenticatedData != wantAD {
				t.Fatalf("AD %v, want %v", quick.AuthenticatedData, wantAD)
			}

			r.advance(100 * time.Second)
			quick, fast = r.ask(t, shape())
			mixed := shape()
			mixed.Question[0].Name = "WWW.example.com."
			general, slow := r.ask(t, mixed)
			if !fast || slow {
				t.Fatalf("fast %v for the lower-case query, %v for the mixed-case one", fast, slow)
			}
			general.Question[0].Name = strings.ToLower(general.Question[0].Name)
			sameAnswer(t, what+", 100 s later", quick, general)
			if ttl := quick.Answer[0].Header().Ttl; ttl != 200 {
				t.Fatalf("TTL %d after 100 s of 300", ttl)
			}
			if n := r.asked.Load(); n != 1 {
				t.Fatalf("the upstream was asked %d times", n)
			}
		})
	}
}

// Every stage before the cache is asked on the fast path too: once the
// gate closes, its own answer goes out, not the cached one.
func TestFastPath_asksEveryStageBeforeTheCache(t *testing.T) {
	r := newFastRig(t)
	for range 2 {
		r.ask(t, shapes()["no EDNS"]())
	}
	if _, fast := r.ask(t, shapes()["no EDNS"]()); !fast {
		t.Fatal("no fast answer to start from")
	}
	r.gate.closed.Store(true)
	ans, fast := r.ask(t, shapes()["no EDNS"]())
	if fast || ans.Rcode != dns.RcodeRefused {
		t.Fatalf("with the gate closed: fast %v, rcode %s", fast, dns.RcodeToString[ans.Rcode])
	}
}

// A stage before the cache that cannot say it passes turns the fast path
// off: every hit goes the general way, still answered from the cache.
func TestFastPath_offBehindAStageThatIsNoPasser(t *testing.T) {
	opaque := stageFunc(func(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
		return next.Answer(ctx, r)
	})
	r := newFastRig(t, opaque)
	for range 4 {
		if _, fast := r.ask(t, shapes()["no EDNS"]()); fast {
			t.Fatal("answered past a stage that is no query.Passer")
		}
	}
	if last := r.sink.all()[3]; last.Cache != query.CacheHit {
		t.Fatalf("cache outcome %q", last.Cache)
	}
}

// The fast path records the event the general path records for a hit.
func TestFastPath_recordsTheGeneralPathsEvent(t *testing.T) {
	r := newFastRig(t)
	r.ask(t, shapes()["EDNS 1232"]())
	r.ask(t, shapes()["EDNS 1232"]())
	if _, fast := r.ask(t, shapes()["EDNS 1232"]()); !fast {
		t.Fatal("no fast answer")
	}
	ev := r.sink.all()
	general, quick := *ev[1], *ev[2]
	if quick.Reply == nil || query.Summary(quick.Reply) != query.Summary(general.Reply) {
		t.Fatalf("fast reply %q, general %q", query.Summary(quick.Reply), query.Summary(general.Reply))
	}
	for _, e := range []*query.Event{&general, &quick} {
		e.Time, e.Duration, e.Reply = time.Time{}, 0, nil
	}
	if !reflect.DeepEqual(general, quick) {
		t.Fatalf("fast event %+v\ngeneral event %+v", quick, general)
	}
}

// A client whose size limit is neither 512 nor 1232 could be sent a
// different packing: it takes the general path.
func TestFastPath_leavesOtherSizeLimitsToTheGeneralPath(t *testing.T) {
	r := newFastRig(t)
	odd := func() *dns.Msg { m := newQuery("www.example.com.", dns.TypeA); m.SetEdns0(900, false); return m }
	canonical := shapes()["EDNS 1232"]
	r.ask(t, canonical())
	r.ask(t, canonical())
	if _, fast := r.ask(t, odd()); fast {
		t.Fatal("a 900-byte client was answered from the 1232-byte template")
	}
}

// A burst sent before any answer is read: every query is answered, by the
// fast path, with its own ID (the reader's buffers are reused for each).
func TestFastPath_burstAnswersEachQueryWithItsID(t *testing.T) {
	r := newFastRig(t)
	for range 2 {
		r.ask(t, shapes()["no EDNS"]())
	}
	before := r.s.stats.fastAnswers.Load()
	c := dialUDP(t, udpAddr(r.s))
	const burst = 83
	for id := range burst {
		m := shapes()["no EDNS"]()
		m.Id = uint16(1000 + id)
		if _, err := c.Write(mustPack(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint16]bool{}
	for range burst {
		seen[readUDPMsg(t, c).Id] = true
	}
	for id := range burst {
		if !seen[uint16(1000+id)] {
			t.Fatalf("no answer with ID %d", 1000+id)
		}
	}
	testutil.WaitFor(t, "every event", 2*time.Second, func() bool { return r.s.stats.fastAnswers.Load()-before == burst })
}

// A cached answer too large for a client without EDNS goes out truncated,
// always by the general path: its event's Reply is the message fit cut, which
// the fast path does not have.
func TestFastPath_leavesTruncatedAnswersToTheGeneralPath(t *testing.T) {
	big := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		var rrs []dns.RR
		for i := range 60 {
			rrs = append(rrs, aRecord(q.Question[0].Name, fmt.Sprintf("192.0.2.%d", i+1)))
		}
		return reply(q, rrs...), testUpstream, nil
	})
	c := cache.New(cache.Options{Size: 10, MaxTTL: time.Hour})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	s := startServer(t, &State{Router: pool(big), Allow: loopback, Stages: []query.Stage{st}})
	conn := dialUDP(t, udpAddr(s))
	for range 4 {
		if _, err := conn.Write(mustPack(t, newQuery("many.example.", dns.TypeA))); err != nil {
			t.Fatal(err)
		}
		if ans := readUDPMsg(t, conn); !ans.Truncated {
			t.Fatal("a 60-record answer to a 512-byte client was not truncated")
		}
	}
	if n := s.stats.fastAnswers.Load(); n != 0 {
		t.Fatalf("%d truncated answers went by the fast path", n)
	}
}

// A datagram longer than any query (the read buffer) is never read in part:
// a valid query with trailing bytes past the slot gets FORMERR, with its
// ID, as a malformed query whose header parses does (docs/design.md#answer-size), and the
// reader goes on.
func TestUDP_datagramLongerThanAnyQueryGetsFormerr(t *testing.T) {
	s := startServer(t, state(answerA("192.0.2.1")))
	c := dialUDP(t, udpAddr(s))
	q := newQuery("a.example.", dns.TypeA)
	long := append(mustPack(t, q), make([]byte, udpReadSize)...)
	if _, err := c.Write(long); err != nil {
		t.Fatal(err)
	}
	if ans := readUDPMsg(t, c); ans.Rcode != dns.RcodeFormatError || ans.Id != q.Id || len(ans.Answer) != 0 {
		t.Fatalf("the long datagram: %s, ID %d (want %d), %d answers; want FORMERR", dns.RcodeToString[ans.Rcode], ans.Id, q.Id, len(ans.Answer))
	}
	if _, err := c.Write(mustPack(t, newQuery("a.example.", dns.TypeA))); err != nil {
		t.Fatal(err)
	}
	if ans := readUDPMsg(t, c); ans.Rcode != dns.RcodeSuccess {
		t.Fatalf("the next query: %s", dns.RcodeToString[ans.Rcode])
	}
}

// A wildcard listener (the NixOS module's default) answers from the address
// the client asked, by the general path and by the fast path alike: the
// client is a socket connected to 127.0.0.2, which drops a datagram from
// any other source (docs/server.md).
func TestUDP_wildcardAnswersFromTheAddressAsked(t *testing.T) {
	c := cache.New(cache.Options{Size: 10, MaxTTL: time.Hour})
	st := c.Stage()
	t.Cleanup(func() { st.Close(); c.Close() })
	s := New(Options{}, &State{Router: pool(answerA("192.0.2.1")), Allow: loopback, Stages: []query.Stage{st}})
	port := testutil.FreePort(t)
	if err := s.Listen([]string{fmt.Sprintf("0.0.0.0:%d", port)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	conn := dialUDP(t, fmt.Sprintf("127.0.0.2:%d", port))
	for i := range 4 {
		if _, err := conn.Write(mustPack(t, newQuery("wild.example.", dns.TypeA))); err != nil {
			t.Fatal(err)
		}
		if ans := readUDPMsg(t, conn); len(ans.Answer) != 1 {
			t.Fatalf("query %d: %d answers, want 1", i, len(ans.Answer))
		}
	}
	if s.stats.fastAnswers.Load() == 0 {
		t.Fatal("no answer went by the fast path: only the general path's source was checked")
	}
}

// copyingRecorder keeps a copy of each event in room it was given
// beforehand, so recording allocates nothing, and says so
// (query.EventCopier), as the history store does.
type copyingRecorder struct{ events []query.Event }

func (r *copyingRecorder) Record(e *query.Event) { r.events = append(r.events, *e) }
func (*copyingRecorder) CopiesEvents()           {}

// When every sink copies what it keeps, a fast hit allocates nothing: its
// event is the reader's, overwritten by the next hit, and each sink still
// sees each hit's own event. A sink that may keep the event gets one of
// its own per hit.
func TestFastPath_reusesTheEventOnlyForSinksThatCopy(t *testing.T) {
	hits := func(sink query.Sink) (*Server, func() ([]byte, *generation, *query.Event)) {
		c := cache.New(cache.Options{Size: 100, MaxTTL: time.Hour})
		st := c.Stage()
		t.Cleanup(func() { st.Close(); c.Close() })
		s := New(Options{}, &State{Router: pool(instant()), Allow: loopback, Stages: []query.Stage{st}, Sinks: []query.Sink{sink}})
		q := newQuery("reuse.example.", dns.TypeA)
		q.SetEdns0(1232, false)
		wire := mustPack(t, q)
		client := netip.MustParseAddr("127.0.0.1")
		for range 2 { // a miss, then a hit that leaves the template
			s.handle(context.Background(), wire, client, query.UDP)
		}
		var name [wireform.MaxName]byte
		dst := make([]byte, 0, maxUDPAnswer)
		var scratch query.Event
		return s, func() ([]byte, *generation, *query.Event) {
			out, g, ev, ok := s.answerFast(wire, &name, client, dst, &scratch)
			if !ok {
				t.Fatal("not answered by the fast path")
			}
			return out, g, ev
		}
	}

	copier := &copyingRecorder{events: make([]query.Event, 0, 200)}
	s, hit := hits(copier)
	if n := testing.AllocsPerRun(100, func() {
		_, g, ev := hit()
		s.finishFast(g, ev, true)
	}); n != 0 {
		t.Errorf("a fast hit with copying sinks allocates %v times, want 0", n)
	}
	events := copier.events
	if len(events) < 100 || events[len(events)-1].Name != "reuse.example." || events[len(events)-1].Cache != query.CacheHit {
		t.Fatalf("%d events, the last %+v", len(events), events[len(events)-1])
	}

	keeper := &sinkRecorder{}
	s, hit = hits(keeper)
	_, g1, ev1 := hit()
	s.finishFast(g1, ev1, true)
	_, g2, ev2 := hit()
	s.finishFast(g2, ev2, true)
	if ev1 == ev2 {
		t.Fatal("a sink that may keep events was handed one event for two hits")
	}
}
