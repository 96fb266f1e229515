package query

import (
	"context"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// recorder is a stage that notes its name on the way in and out, and
// optionally answers without calling next.
type recorder struct {
	name   string
	trail  *[]string
	answer bool
}

func (s recorder) Answer(ctx context.Context, r *Request, next Handler) (*dns.Msg, error) {
	*s.trail = append(*s.trail, s.name+">")
	if s.answer {
		return new(dns.Msg), nil
	}
	m, err := next.Answer(ctx, r)
	*s.trail = append(*s.trail, "<"+s.name)
	return m, err
}

func TestChainRunsStagesInOrderThenLast(t *testing.T) {
	var trail []string
	last := HandlerFunc(func(context.Context, *Request) (*dns.Msg, error) {
		trail = append(trail, "route")
		return new(dns.Msg), nil
	})
	h := Chain(last, recorder{"local", &trail, false}, recorder{"cache", &trail, false})
	if _, err := h.Answer(context.Background(), &Request{Event: &Event{}}); err != nil {
		t.Fatal(err)
	}
	want := []string{"local>", "cache>", "route", "<cache", "<local"}
	if !slices.Equal(trail, want) {
		t.Fatalf("trail %v, want %v", trail, want)
	}
}

func TestChainStageThatAnswersSkipsTheRest(t *testing.T) {
	var trail []string
	last := HandlerFunc(func(context.Context, *Request) (*dns.Msg, error) {
		trail = append(trail, "route")
		return new(dns.Msg), nil
	})
	h := Chain(last, recorder{"local", &trail, true}, recorder{"cache", &trail, false})
	if _, err := h.Answer(context.Background(), &Request{Event: &Event{}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(trail, []string{"local>"}) {
		t.Fatalf("trail %v: the stage after an answering stage ran", trail)
	}
}

func TestChainWithNoStagesIsLast(t *testing.T) {
	called := false
	last := HandlerFunc(func(context.Context, *Request) (*dns.Msg, error) { called = true; return nil, nil })
	_, _ = Chain(last).Answer(context.Background(), &Request{})
	if !called {
		t.Fatal("last handler not called")
	}
}

func TestSummary(t *testing.T) {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	answer := func(rrs ...dns.RR) *dns.Msg { return &dns.Msg{Answer: rrs} }
	nx := &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}}
	cases := []struct {
		name string
		m    *dns.Msg
		want string
	}{
		{"nil", nil, ""},
		{"error rcode", nx, ""},
		{"nodata", answer(), "NODATA"},
		{"one", answer(rr("a.example. 60 IN A 192.0.2.1")), "A 192.0.2.1"},
		{"chain", answer(rr("a.example. 60 IN CNAME b.example."), rr("b.example. 60 IN AAAA 2001:db8::1")),
			"CNAME b.example., AAAA 2001:db8::1"},
		{"more than three", answer(rr("a. 1 IN A 192.0.2.1"), rr("a. 1 IN A 192.0.2.2"), rr("a. 1 IN A 192.0.2.3"),
			rr("a. 1 IN A 192.0.2.4"), rr("a. 1 IN A 192.0.2.5")),
			"A 192.0.2.1, A 192.0.2.2, A 192.0.2.3 (+2)"},
	}
	for _, c := range cases {
		if got := Summary(c.m); got != c.want {
			t.Errorf("%s: Summary = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestProtoNames(t *testing.T) {
	for p, want := range map[Proto]string{UDP: "udp", TCP: "tcp", DoT: "dot", DoH: "doh", 0: "unknown", 9: "unknown"} {
		if p.String() != want {
			t.Errorf("Proto(%d) = %q, want %q", p, p.String(), want)
		}
	}
	if UDP.Stream() || !TCP.Stream() || !DoT.Stream() || !DoH.Stream() {
		t.Error("Stream: only UDP is a datagram transport")
	}
}
