package query

import (
	"context"
	"net"
	"slices"
	"strings"
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

// TestRdataMatchesString: the direct forms of A and CNAME records are the
// text rr.String() gives after its header, including the records that take
// the slow path (a name needing escapes, an A record holding no IPv4
// address).
func TestRdataMatchesString(t *testing.T) {
	hdr := func(rrtype uint16) dns.RR_Header {
		return dns.RR_Header{Name: "www.example.", Rrtype: rrtype, Class: dns.ClassINET, Ttl: 60}
	}
	rrs := []dns.RR{
		&dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP("192.0.2.1").To4()},
		&dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP("192.0.2.1")}, // 16-byte form
		&dns.A{Hdr: hdr(dns.TypeA), A: net.ParseIP("2001:db8::1")},
		&dns.A{Hdr: hdr(dns.TypeA)},
		&dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: "cdn.example.net."},
		&dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: "Mixed-Case_srv.Example.NET."},
		&dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: `we\ird\.label.example.`},
		&dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: "with space.example."},
		&dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: "."},
		&dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: net.ParseIP("2001:db8::1")},
	}
	for _, rr := range rrs {
		want := strings.TrimPrefix(rr.String(), rr.Header().String())
		if got := rdata(rr); got != want {
			t.Errorf("rdata(%#v) = %q, want %q", rr, got, want)
		}
	}
}
