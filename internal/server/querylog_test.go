package server

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/upstream"

	"github.com/nxdns/nxdns/internal/query"
)

func TestQueryLog_oneLinePerQueryWithFields(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		if q.Question[0].Name == "late.example." {
			return nil, "", &upstream.QueryError{Kind: upstream.KindBudgetExhausted, Budget: 5 * time.Second}
		}
		return answerA("192.0.2.1")(ctx, q)
	})
	st := state(r)
	st.QueryLog = true
	st.Names = namesFunc(func(a netip.Addr) string {
		if a == netip.MustParseAddr("127.0.0.1") {
			return "laptop"
		}
		return ""
	})
	s := New(Options{Logger: zap.New(core)}, st)
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())

	// Each line is written after its answer was sent: wait for it before
	// the next query, so the lines are in the queries' order.
	lines := func(n int) func() bool { return func() bool { return logs.FilterMessage("query").Len() >= n } }
	exchange(t, "udp", udpAddr(s), newQuery("ok.example.", dns.TypeAAAA))
	waitFor(t, "the first query's line", lines(1))
	late := newQuery("late.example.", dns.TypeA)
	late.SetEdns0(1232, false)
	exchange(t, "tcp", tcpAddr(s), late)
	waitFor(t, "the second query's line", lines(2))

	// A line is written after its answer was sent, so the second query's
	// line can come first: wait for both and tell them apart by name.
	waitFor(t, "two query lines", func() bool { return logs.FilterMessage("query").Len() >= 2 })
	entries := logs.FilterMessage("query").AllUntimed()
	if len(entries) != 2 {
		t.Fatalf("%d query lines, want 2", len(entries))
	}
	byName := map[string]map[string]any{}
	for _, e := range entries {
		if e.LoggerName != "server.query" || e.Level != zapcore.InfoLevel {
			t.Errorf("line on %q at %v, want server.query at info", e.LoggerName, e.Level)
		}
		m := e.ContextMap()
		byName[fmt.Sprint(m["name"])] = m
	}
	ok, fail := byName["ok.example."], byName["late.example."]
	if ok == nil || fail == nil {
		t.Fatalf("query lines %v: want one for ok.example. and one for late.example.", byName)
	}
	for k, want := range map[string]any{
		"client": "127.0.0.1", "client_name": "laptop", "name": "ok.example.", "type": "AAAA",
		"rcode": "NOERROR", "source": "pool", "upstream": testUpstream, "proto": "udp",
	} {
		if ok[k] != want {
			t.Errorf("answered line %s = %v, want %v", k, ok[k], want)
		}
	}
	if _, has := ok["duration_ms"].(float64); !has {
		t.Errorf("answered line duration_ms = %#v, want a float", ok["duration_ms"])
	}
	if _, has := ok["ede"]; has {
		t.Error("answered line has an ede field; none was sent")
	}
	for k, want := range map[string]any{"rcode": "SERVFAIL", "ede": uint16(dns.ExtendedErrorCodeNoReachableAuthority), "ede_text": "budget exhausted after 5000 ms", "proto": "tcp"} {
		if fail[k] != want {
			t.Errorf("budget line %s = %v (%T), want %v", k, fail[k], fail[k], want)
		}
	}
	if up, has := fail["upstream"]; has {
		t.Errorf("budget line names upstream %v; none was attributed (never a fake identity)", up)
	}
}

func TestQueryLog_offAndUnnamed(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	st := state(answerA("192.0.2.1"))
	st.Names = namesFunc(func(netip.Addr) string { return "" })
	s := New(Options{Logger: zap.New(core)}, st)
	wire := mustPack(t, newQuery("a.example.", dns.TypeA))
	client := netip.MustParseAddr("127.0.0.1")

	s.handle(context.Background(), wire, client, query.UDP)
	if n := logs.FilterMessage("query").Len(); n != 0 {
		t.Errorf("%d query lines with the query log off", n)
	}
	st2 := *st
	st2.QueryLog = true
	s.Swap(&st2)
	s.handle(context.Background(), wire, client, query.UDP)
	lines := logs.FilterMessage("query").AllUntimed()
	if len(lines) != 1 {
		t.Fatalf("%d query lines, want 1", len(lines))
	}
	if _, has := lines[0].ContextMap()["client_name"]; has {
		t.Error("client_name logged for a client with no name")
	}
}

// triedFunc is a Resolver that reports the upstreams it tried, as the pool
// does after a failover.
type triedFunc func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, []string, error)

func (f triedFunc) Exchange(ctx context.Context, q *dns.Msg) (upstream.Result, error) {
	resp, up, tried, err := f(ctx, q)
	return upstream.Result{Msg: resp, Upstream: up, Tried: tried}, err
}

// TestQueryLog_triedAndAnswer: an answer after a failover logs every
// upstream tried, in order, and a summary of the answer (docs/design.md#query-log; issue 16
// finding 19); the summary names the records, the line stays one line.
func TestQueryLog_triedAndAnswer(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	const primary = "tls://192.0.2.1:853"
	r := triedFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, []string, error) {
		name := q.Question[0].Name
		return reply(q, aRecord(name, "192.0.2.7"), aRecord(name, "192.0.2.8")), testUpstream, []string{primary, testUpstream}, nil
	})
	st := state(r)
	st.QueryLog = true
	s := New(Options{Logger: zap.New(core)}, st)
	if err := s.Listen([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	exchange(t, "udp", udpAddr(s), newQuery("two.example.", dns.TypeA))
	// The line is written after the answer was sent: wait for it.
	waitFor(t, "the query line", func() bool { return logs.FilterMessage("query").Len() >= 1 })
	entries := logs.FilterMessage("query").AllUntimed()
	if len(entries) != 1 {
		t.Fatalf("%d query lines, want 1", len(entries))
	}
	m := entries[0].ContextMap()
	if got := fmt.Sprint(m["tried"]); got != fmt.Sprint([]any{primary, testUpstream}) {
		t.Errorf("tried = %s, want [%s %s]", got, primary, testUpstream)
	}
	if m["upstream"] != testUpstream {
		t.Errorf("upstream = %v, want %s", m["upstream"], testUpstream)
	}
	if m["answer"] != "A 192.0.2.7, A 192.0.2.8" {
		t.Errorf("answer = %q", m["answer"])
	}
}
