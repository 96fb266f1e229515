package server

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/upstream"

	"github.com/nxdns/nxdns/internal/query"
)

// failWith is a resolver that fails every query with err.
func failWith(err error) resolverFunc {
	return func(context.Context, *dns.Msg) (*dns.Msg, string, error) { return nil, "", err }
}

// docs/design.md#pool-answers: each error group's SERVFAIL and Extended DNS Error.
func TestFailure_SERVFAILWithEDEPerGroup(t *testing.T) {
	const a, b = "tls://192.0.2.1:853", "https://192.0.2.2:443"
	bogus := resolverFunc(func(_ context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		m := reply(q)
		m.Rcode = dns.RcodeServerFailure
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeDNSBogus, ExtraText: "signature expired"})
		return m, a, nil
	})
	for _, tc := range []struct {
		name     string
		r        Resolver
		code     uint16
		text     []string // substrings of the EDE text
		noEDNS   bool
		wantNoOP bool
	}{
		{"budget exhausted → 22",
			failWith(&upstream.QueryError{Kind: upstream.KindBudgetExhausted, Tried: []string{a}, Budget: 5 * time.Second}),
			dns.ExtendedErrorCodeNoReachableAuthority, []string{"budget exhausted after 5000 ms"}, false, false},
		{"peer fault → 23 naming the upstreams tried",
			failWith(&upstream.QueryError{Kind: upstream.KindPeerTimeout, Tried: []string{a, b}, Attributed: b}),
			dns.ExtendedErrorCodeNetworkError, []string{a, b, "upstream timeout"}, false, false},
		{"local resource → 0",
			failWith(&upstream.QueryError{Kind: upstream.KindNoResources}),
			dns.ExtendedErrorCodeOther, []string{"no local resources"}, false, false},
		{"error without a kind → 0 (blames no upstream)",
			failWith(errors.New("bug")),
			dns.ExtendedErrorCodeOther, nil, false, false},
		{"relayed SERVFAIL keeps the upstream's EDE",
			bogus, dns.ExtendedErrorCodeDNSBogus, []string{"signature expired"}, false, false},
		{"client without EDNS → bare SERVFAIL",
			failWith(&upstream.QueryError{Kind: upstream.KindBudgetExhausted, Budget: 5 * time.Second}),
			0, nil, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, state(tc.r))
			q := newQuery("fail.example.", dns.TypeA)
			if !tc.noEDNS {
				q.SetEdns0(1232, false)
			}
			resp := exchange(t, "udp", udpAddr(s), q)
			if resp.Rcode != dns.RcodeServerFailure {
				t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
			}
			if tc.wantNoOP {
				if resp.IsEdns0() != nil {
					t.Errorf("OPT %v in the answer to a client without EDNS", resp.IsEdns0())
				}
				return
			}
			e := edeOf(resp)
			if e == nil {
				t.Fatalf("no EDE in %v", resp)
			}
			if e.InfoCode != tc.code {
				t.Errorf("EDE %d, want %d", e.InfoCode, tc.code)
			}
			for _, sub := range tc.text {
				if !strings.Contains(e.ExtraText, sub) {
					t.Errorf("EDE text %q lacks %q", e.ExtraText, sub)
				}
			}
		})
	}
}

func TestPeerText_boundsTheList(t *testing.T) {
	var tried []string
	for i := range 10 {
		tried = append(tried, "tls://192.0.2."+string(rune('0'+i))+":853")
	}
	got := peerText(upstream.KindNetwork, &upstream.QueryError{Tried: tried}, "")
	if !strings.Contains(got, tried[3]) || strings.Contains(got, tried[4]) || !strings.Contains(got, "and 6 more") {
		t.Errorf("peerText = %q, want the first %d upstreams and a count of the rest", got, maxEDENames)
	}
	if got := peerText(upstream.KindNetwork, nil, "udp://192.168.1.1:53"); !strings.Contains(got, "udp://192.168.1.1:53") {
		t.Errorf("peerText without a QueryError = %q, want the attributed resolver named", got)
	}
}

// A cancelled query answers nothing, whichever way the cancellation reached
// the handler: a Cancellation error, or its own ctx ending.
func TestHandler_cancellationAnswersNothing(t *testing.T) {
	wire := mustPack(t, newQuery("a.example.", dns.TypeA))
	client := netip.MustParseAddr("127.0.0.1")
	for _, tc := range []struct {
		name   string
		r      Resolver
		cancel bool
	}{
		{"Cancellation group", failWith(&upstream.AttemptError{Kind: upstream.KindCanceled}), false},
		{"ctx ended, error without a kind", resolverFunc(func(ctx context.Context, _ *dns.Msg) (*dns.Msg, string, error) {
			<-ctx.Done()
			return nil, "", ctx.Err()
		}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Options{}, state(tc.r))
			ctx, cancel := context.WithCancel(context.Background())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			if ans := s.handle(ctx, wire, client, query.UDP); ans != nil {
				t.Errorf("cancelled query answered %d bytes", len(ans))
			}
			if n := count(s.Snapshot(), "pool", "none"); n != 1 {
				t.Errorf("pool/none count = %d, want 1", n)
			}
		})
	}
}

// The handler never modifies the resolver's answer, which a cache may share.
func TestRelay_leavesResolverAnswerUntouched(t *testing.T) {
	var shared *dns.Msg
	r := resolverFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, string, error) {
		m, up, err := bigAnswer(ctx, q)
		m.SetEdns0(4096, true)
		shared = m
		return m, up, err
	})
	s := New(Options{}, state(r))
	q := newQuery("big.example.", dns.TypeTXT)
	ans := s.handle(context.Background(), mustPack(t, q), netip.MustParseAddr("127.0.0.1"), query.UDP) // truncated to 512
	if len(ans) > 512 {
		t.Fatalf("answer %d bytes over UDP without EDNS", len(ans))
	}
	if len(shared.Answer) != 15 || len(shared.Extra) != 1 || shared.Truncated {
		t.Errorf("resolver's answer changed: %d answers, %d extra, TC %v", len(shared.Answer), len(shared.Extra), shared.Truncated)
	}
}

// A padded query over DoT or DoH gets an answer padded to a multiple of
// 468 octets (RFC 7830 §3, RFC 8467 §4.1); an unpadded one, and any query
// over plain UDP or TCP, gets no padding.
func TestPack_padsDoTAndDoHAnswersToPaddedQueries(t *testing.T) {
	s := New(Options{}, state(answerA("192.0.2.1")))
	for _, proto := range []query.Proto{query.DoT, query.DoH, query.TCP, query.UDP} {
		for _, paddedQuery := range []bool{true, false} {
			q := newQuery("pad.example.", dns.TypeA)
			q.SetEdns0(1232, false)
			if paddedQuery {
				q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, 20)})
			}
			wire := s.handle(context.Background(), mustPack(t, q), netip.MustParseAddr("127.0.0.1"), proto)
			m := new(dns.Msg)
			if err := m.Unpack(wire); err != nil || len(m.Answer) != 1 {
				t.Fatalf("%s: %v, %v", proto, m, err)
			}
			var padding bool
			for _, o := range m.IsEdns0().Option {
				padding = padding || o.Option() == dns.EDNS0PADDING
			}
			want := paddedQuery && (proto == query.DoT || proto == query.DoH)
			if padding != want || want && len(wire)%468 != 0 {
				t.Errorf("%s, padded query %v: %d bytes, padding %v; want padding %v to a multiple of 468", proto, paddedQuery, len(wire), padding, want)
			}
		}
	}
}
