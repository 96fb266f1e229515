package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// stageFunc is a callback Stage.
type stageFunc func(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error)

func (f stageFunc) Answer(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
	return f(ctx, r, next)
}

// sinkRecorder keeps a copy of every event it is handed (the Sink
// contract: the event is the sink's only for the call).
type sinkRecorder struct {
	mu     sync.Mutex
	events []*query.Event
}

func (s *sinkRecorder) Record(e *query.Event) {
	c := *e
	s.mu.Lock()
	s.events = append(s.events, &c)
	s.mu.Unlock()
}

func (s *sinkRecorder) all() []*query.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*query.Event(nil), s.events...)
}

// A stage that answers itself is the source of the answer: the route is
// never asked, and the client gets the stage's records with its own ID.
func TestStageAnswersWithoutTheRoute(t *testing.T) {
	routed := false
	st := state(resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		routed = true
		return reply(q), testUpstream, nil
	}))
	st.Stages = []query.Stage{stageFunc(func(_ context.Context, r *query.Request, _ query.Handler) (*dns.Msg, error) {
		r.Event.Source = query.SourceLocal
		m := reply(r.Msg, aRecord(r.Msg.Question[0].Name, "192.0.2.7"))
		m.Authoritative = true
		return m, nil
	})}
	sink := &sinkRecorder{}
	st.Sinks = []query.Sink{sink}
	s := startServer(t, st)

	q := newQuery("nas.home.", dns.TypeA)
	q.Id = 4242
	ans := exchange(t, "udp", udpAddr(s), q)
	if ans.Id != 4242 || !ans.Authoritative || len(ans.Answer) != 1 {
		t.Fatalf("answer %v: want the stage's authoritative record with the client's ID", ans)
	}
	if routed {
		t.Error("the route was asked although a stage answered")
	}
	waitFor(t, "the sink's event", func() bool { return len(sink.all()) == 1 })
	if n := count(s.Snapshot(), query.SourceLocal, "NOERROR"); n != 1 {
		t.Errorf("local/NOERROR = %d, want 1: the counters read the stage's source", n)
	}
}

// Stages run in order around the route, and each sees the same Request: the
// event the route fills in is the one the stage reads after next returns.
func TestStagesWrapTheRoute(t *testing.T) {
	var mu sync.Mutex
	var trail []string
	note := func(s string) { mu.Lock(); trail = append(trail, s); mu.Unlock() }
	seenUpstream := make(chan string, 1)
	st := state(answerA("192.0.2.1"))
	st.Stages = []query.Stage{
		stageFunc(func(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
			note("first")
			m, err := next.Answer(ctx, r)
			seenUpstream <- r.Event.Upstream
			return m, err
		}),
		stageFunc(func(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
			note("second")
			return next.Answer(ctx, r)
		}),
	}
	s := startServer(t, st)
	exchange(t, "udp", udpAddr(s), newQuery("example.org.", dns.TypeA))
	if got := <-seenUpstream; got != testUpstream {
		t.Errorf("after next returned the event named upstream %q, want %q", got, testUpstream)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(trail) != 2 || trail[0] != "first" || trail[1] != "second" {
		t.Errorf("stages ran as %v, want [first second]", trail)
	}
}

// Every query produces exactly one event, handed to the sinks complete: the
// question, the transport, the rcode and answer sent, who answered, the
// duration. Refused queries too, which never reach the stages.
func TestOneCompleteEventPerQuery(t *testing.T) {
	st := state(answerA("192.0.2.1"))
	st.Allow = nil // refuse everyone first
	sink := &sinkRecorder{}
	st.Sinks = []query.Sink{sink}
	stageRan := false
	st.Stages = []query.Stage{stageFunc(func(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
		stageRan = true
		return next.Answer(ctx, r)
	})}
	s := startServer(t, st)
	exchange(t, "udp", udpAddr(s), newQuery("refused.example.", dns.TypeA))
	waitFor(t, "the refused query's event", func() bool { return len(sink.all()) == 1 })
	if e := sink.all()[0]; e.Source != query.SourceRefused || e.Rcode != dns.RcodeRefused || e.Resolved || stageRan {
		t.Errorf("refused event %+v (stage ran: %v): want source refused, REFUSED, not resolved, no stage", e, stageRan)
	}

	allowed := state(answerA("192.0.2.1"))
	allowed.Sinks = st.Sinks
	s.Swap(allowed)
	before := time.Now()
	exchange(t, "tcp", tcpAddr(s), newQuery("Example.ORG.", dns.TypeAAAA))
	waitFor(t, "the answered query's event", func() bool { return len(sink.all()) == 2 })
	e := sink.all()[1]
	switch {
	case e.Name != "Example.ORG." || e.Qtype != dns.TypeAAAA || e.Qclass != dns.ClassINET:
		t.Errorf("question %q %d %d, want the client's, case kept", e.Name, e.Qtype, e.Qclass)
	case e.Proto != query.TCP:
		t.Errorf("proto %v, want tcp", e.Proto)
	case e.Source != "pool" || e.Upstream != testUpstream || len(e.Tried) != 1 || e.Tried[0] != testUpstream:
		t.Errorf("source %q upstream %q tried %v, want pool and the test upstream", e.Source, e.Upstream, e.Tried)
	case e.Rcode != dns.RcodeSuccess || e.Reply == nil || len(e.Reply.Answer) != 1:
		t.Errorf("rcode %d reply %v, want NOERROR with the answer sent", e.Rcode, e.Reply)
	case !e.Resolved || e.Duration <= 0 || e.Time.Before(before.Add(-time.Second)):
		t.Errorf("resolved %v duration %v time %v: want a resolved, timed event", e.Resolved, e.Duration, e.Time)
	}
}

// The stages see the answer deadline: arrival plus the state's budget.
func TestRequestDeadlineIsArrivalPlusBudget(t *testing.T) {
	got := make(chan time.Duration, 1)
	st := state(answerA("192.0.2.1"))
	st.Budget = 1234 * time.Millisecond
	st.Stages = []query.Stage{stageFunc(func(ctx context.Context, r *query.Request, next query.Handler) (*dns.Msg, error) {
		got <- r.Deadline.Sub(r.Event.Time)
		return next.Answer(ctx, r)
	})}
	s := startServer(t, st)
	exchange(t, "udp", udpAddr(s), newQuery("example.org.", dns.TypeA))
	if d := <-got; d != 1234*time.Millisecond {
		t.Errorf("deadline is arrival + %v, want + 1.234s", d)
	}
}

// A stage's own Extended DNS Error (EDE 15 for a blocked name, EDE 3 for a
// stale answer) reaches the client and the event, as an upstream's would.
func TestStageEDEIsRelayed(t *testing.T) {
	st := state(answerA("192.0.2.1"))
	sink := &sinkRecorder{}
	st.Sinks = []query.Sink{sink}
	st.Stages = []query.Stage{stageFunc(func(_ context.Context, r *query.Request, _ query.Handler) (*dns.Msg, error) {
		r.Event.Source = query.SourceBlocked
		m := reply(r.Msg)
		o := newOPT(false)
		o.Option = append(o.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeBlocked, ExtraText: "ads: ||ads.example^"})
		m.Extra = append(m.Extra, o)
		return m, nil
	})}
	s := startServer(t, st)
	q := newQuery("ads.example.", dns.TypeA)
	q.SetEdns0(1232, false)
	ans := exchange(t, "udp", udpAddr(s), q)
	if e := edeOf(ans); e == nil || e.InfoCode != dns.ExtendedErrorCodeBlocked {
		t.Fatalf("answer EDE %v, want 15", e)
	}
	waitFor(t, "the event", func() bool { return len(sink.all()) == 1 })
	if e := sink.all()[0]; e.EDE == nil || e.EDE.Code != dns.ExtendedErrorCodeBlocked || e.Source != query.SourceBlocked {
		t.Errorf("event EDE %v source %q, want 15 and blocked", e.EDE, e.Source)
	}
}
