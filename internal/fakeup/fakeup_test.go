package fakeup

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func wantA(t *testing.T, r *dns.Msg, name string) {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("reply for %s: rcode %s, %d answers, want NOERROR with one A", name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok {
		t.Fatalf("answer %v is not an A record", r.Answer[0])
	}
	if got, want := netip.AddrFrom4([4]byte(a.A.To4())), AddressV4(name); got != want {
		t.Errorf("A %s = %v, want %v", name, got, want)
	}
}

func TestDoT_pipelinedAnswersLeaveAsTheirLatencyEnds(t *testing.T) {
	const latency = 500 * time.Millisecond
	cfg := Config{delay: func(name string) (time.Duration, bool) {
		return 0, strings.HasPrefix(name, "fast.") // "fast" names skip the latency
	}}
	s := start(t, cfg, "dot://127.0.0.1:0?latency="+latency.String())
	c := s.dialTLS(t, 0)

	begin := time.Now()
	names := []string{"slow1.example.", "slow2.example.", "fast.example."}
	for i, n := range names {
		q := query(n, dns.TypeA)
		q.Id = uint16(i + 1)
		writeMsg(t, c, q)
	}
	var order []string
	for range names {
		r := mustRead(t, c)
		name := r.Question[0].Name
		wantA(t, r, name)
		order = append(order, name)
	}
	elapsed := time.Since(begin)

	if order[0] != "fast.example." {
		t.Errorf("arrival order %v: the query sent last with no latency should be answered first", order)
	}
	// Both slow queries waited concurrently: one latency plus a margin, never two.
	if elapsed >= 2*latency {
		t.Errorf("three pipelined answers took %v, want under %v (concurrent, not serial)", elapsed, 2*latency)
	}
	s.Close() // the count follows a reply's write: read it once every writer is done
	if got := s.counts(0); got.Connections != 1 || got.Handshakes != 1 || got.Queries != 3 || got.Answered != 3 {
		t.Errorf("counts = %+v, want 1 connection, 1 handshake, 3 queries, 3 answered", got)
	}
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func TestUDP_tcAnswersTruncatedWithNoRecords(t *testing.T) {
	s := start(t, Config{}, "udp://127.0.0.1:0?tc=1", "tcp://127.0.0.1:0")
	r, err := exchangeUDP(t, s.addr(0), query("big.example.", dns.TypeA), ioBound)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Truncated || len(r.Answer) != 0 || r.Rcode != dns.RcodeSuccess {
		t.Errorf("reply TC=%v with %d answers, rcode %s; want TC=1, none, NOERROR", r.Truncated, len(r.Answer), dns.RcodeToString[r.Rcode])
	}
	// The TCP retry a client then makes gets the full answer.
	c := dialTCP(t, s.addr(1))
	writeMsg(t, c, query("big.example.", dns.TypeA))
	wantA(t, mustRead(t, c), "big.example.")
}

func TestTCP_answersEachType(t *testing.T) {
	s := start(t, Config{TTL: 42}, "tcp://127.0.0.1:0")
	c := dialTCP(t, s.addr(0))
	tests := []struct {
		qtype uint16
		check func(dns.RR) bool
	}{
		{dns.TypeA, func(rr dns.RR) bool { return rr.(*dns.A).A.Equal(AddressV4("Mixed.Example.").AsSlice()) }},
		{dns.TypeAAAA, func(rr dns.RR) bool { return rr.(*dns.AAAA).AAAA.Equal(AddressV6("mixed.example.").AsSlice()) }},
		{dns.TypeTXT, nil}, // NODATA
		{dns.TypeMX, nil},
	}
	for _, tt := range tests {
		t.Run(dns.TypeToString[tt.qtype], func(t *testing.T) {
			writeMsg(t, c, query("Mixed.Example.", tt.qtype))
			r := mustRead(t, c)
			if r.Rcode != dns.RcodeSuccess || r.Question[0].Name != "Mixed.Example." {
				t.Fatalf("rcode %s question %v; want NOERROR and the name as asked", dns.RcodeToString[r.Rcode], r.Question)
			}
			switch {
			case tt.check == nil && len(r.Answer) != 0:
				t.Errorf("%d answers, want NODATA", len(r.Answer))
			case tt.check != nil && (len(r.Answer) != 1 || !tt.check(r.Answer[0]) || r.Answer[0].Header().Ttl != 42):
				t.Errorf("answer %v, want the synthetic address with TTL 42", r.Answer)
			}
		})
	}
}

func TestEDNSIsEchoedWithoutOptions(t *testing.T) {
	s := start(t, Config{}, "udp://127.0.0.1:0")
	q := query("edns.example.", dns.TypeA)
	q.SetEdns0(4096, true)
	q.IsEdns0().Option = append(q.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0123456789abcdef"})
	r, err := exchangeUDP(t, s.addr(0), q, ioBound)
	if err != nil {
		t.Fatal(err)
	}
	opt := r.IsEdns0()
	if opt == nil || !opt.Do() || len(opt.Option) != 0 {
		t.Errorf("OPT %v, want one with DO set and no options", opt)
	}
	r, err = exchangeUDP(t, s.addr(0), query("plain.example.", dns.TypeA), ioBound)
	if err != nil {
		t.Fatal(err)
	}
	if r.IsEdns0() != nil {
		t.Error("reply to a query without EDNS carries an OPT")
	}
}

func TestRefuseAnswersREFUSED(t *testing.T) {
	s := start(t, Config{}, "udp://127.0.0.1:0?refuse=1")
	r, err := exchangeUDP(t, s.addr(0), query("no.example.", dns.TypeA), ioBound)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 {
		t.Errorf("rcode %s with %d answers, want REFUSED and none", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
}

// A stalled connection reads and counts the query, never answers, and stays
// open (a read times out rather than ending) until the server closes.
func TestStall_holdsTheConnectionUntilClose(t *testing.T) {
	const quiet = 300 * time.Millisecond
	for _, tr := range []string{"tcp", "dot"} {
		t.Run(tr, func(t *testing.T) {
			s := start(t, Config{}, tr+"://127.0.0.1:0?stall=1")
			var c net.Conn
			if tr == "dot" {
				c = s.dialTLS(t, 0)
			} else {
				c = dialTCP(t, s.addr(0))
			}
			writeMsg(t, c, query("stall.example.", dns.TypeA))
			if _, err := readMsg(c, quiet); !isTimeout(err) {
				t.Fatalf("read = %v, want a timeout: no answer, connection held", err)
			}
			s.Close()
			if _, err := readMsg(c, ioBound); isTimeout(err) || err == nil {
				t.Errorf("read after server Close = %v, want the connection closed", err)
			}
			if got := s.counts(0); got.Queries != 1 || got.Stalled != 1 || got.Answered != 0 {
				t.Errorf("counts = %+v, want 1 query, 1 stalled, 0 answered", got)
			}
		})
	}
}

func TestIdleClose_closesAnIdleConnection(t *testing.T) {
	const idle = 200 * time.Millisecond
	s := start(t, Config{}, "tcp://127.0.0.1:0?idle_close="+idle.String())
	c := dialTCP(t, s.addr(0))
	writeMsg(t, c, query("idle.example.", dns.TypeA))
	mustRead(t, c)
	answered := time.Now()
	_, err := readMsg(c, ioBound)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("read on the idle connection = %v, want EOF", err)
	}
	if waited := time.Since(answered); waited < idle/2 {
		t.Errorf("closed %v after the answer, want about %v", waited, idle)
	}
}

// idle means nothing to say either: an answer owed longer than idle_close
// keeps the connection open until it is delivered.
func TestIdleClose_waitsForAnswersOwed(t *testing.T) {
	s := start(t, Config{}, "tcp://127.0.0.1:0?idle_close=100ms&latency=400ms")
	c := dialTCP(t, s.addr(0))
	writeMsg(t, c, query("owed.example.", dns.TypeA))
	wantA(t, mustRead(t, c), "owed.example.")
	if _, err := readMsg(c, ioBound); !errors.Is(err, io.EOF) {
		t.Errorf("read after the answer = %v, want EOF once idle", err)
	}
}

// close_on_query=N closes a connection, its Nth query read and unanswered,
// so the client sees a clean close (EOF) on a connection it reused: the
// stale-connection race of docs/design.md#stale-connection, on demand. The count is per connection.
func TestCloseOnQuery_closesUnansweredAtTheNthQuery(t *testing.T) {
	for _, tr := range []string{"tcp", "dot"} {
		t.Run(tr, func(t *testing.T) {
			s := start(t, Config{}, tr+"://127.0.0.1:0?close_on_query=3")
			dial := func() net.Conn {
				if tr == "dot" {
					return s.dialTLS(t, 0)
				}
				return dialTCP(t, s.addr(0))
			}
			c := dial()
			for _, name := range []string{"one.example.", "two.example."} {
				writeMsg(t, c, query(name, dns.TypeA))
				wantA(t, mustRead(t, c), name)
			}
			writeMsg(t, c, query("three.example.", dns.TypeA))
			if m, err := readMsg(c, ioBound); !errors.Is(err, io.EOF) {
				t.Fatalf("read after the third query = %v, %v; want EOF and no answer", m, err)
			}
			c = dial() // a new connection counts from one again
			writeMsg(t, c, query("again.example.", dns.TypeA))
			wantA(t, mustRead(t, c), "again.example.")
			s.Close()
			if got := s.counts(0); got.Connections != 2 || got.Queries != 4 || got.Answered != 3 {
				t.Errorf("counts = %+v, want 2 connections, 4 queries, 3 answered", got)
			}
		})
	}
}

// Queries pipelined before the Nth still get their answers, even one still
// waiting out its latency when the Nth arrives; nothing after it is read.
func TestCloseOnQuery_deliversAnswersOwedBeforeClosing(t *testing.T) {
	s := start(t, Config{}, "tcp://127.0.0.1:0?close_on_query=2&latency=100ms")
	c := dialTCP(t, s.addr(0))
	writeMsg(t, c, query("owed.example.", dns.TypeA))
	writeMsg(t, c, query("closes.example.", dns.TypeA))
	wantA(t, mustRead(t, c), "owed.example.")
	if m, err := readMsg(c, ioBound); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the owed answer = %v, %v; want EOF", m, err)
	}
}

func TestHandshakeDelay_shapesTheHandshake(t *testing.T) {
	const delay = 300 * time.Millisecond
	s := start(t, Config{}, "dot://127.0.0.1:0?handshake_delay="+delay.String())
	begin := time.Now()
	c := s.dialTLS(t, 0)
	took := time.Since(begin)
	if took < delay {
		t.Errorf("handshake took %v, want at least %v", took, delay)
	}
	writeMsg(t, c, query("hs.example.", dns.TypeA))
	wantA(t, mustRead(t, c), "hs.example.")
}

func TestAddresses_deterministicAndInRange(t *testing.T) {
	v4 := netip.MustParsePrefix("198.18.0.0/15")
	v6 := netip.MustParsePrefix("2001:db8::/32")
	if AddressV4("WWW.Example.COM") != AddressV4("www.example.com.") {
		t.Error("A differs by case or trailing dot")
	}
	if AddressV6("WWW.Example.COM") != AddressV6("www.example.com.") {
		t.Error("AAAA differs by case or trailing dot")
	}
	var seen4, seen6 []netip.Addr
	for _, n := range []string{"a.test.", "b.test.", "c.test.", "www.example.com.", "burst-0.burst.test.", "burst-1.burst.test.", "burst-2.burst.test."} {
		a4, a6 := AddressV4(n), AddressV6(n)
		if !v4.Contains(a4) || !v6.Contains(a6) {
			t.Errorf("%s → %v, %v: outside %v / %v", n, a4, a6, v4, v6)
		}
		if slices.Contains(seen4, a4) || slices.Contains(seen6, a6) {
			t.Errorf("%s → %v, %v: same address as another name", n, a4, a6)
		}
		seen4, seen6 = append(seen4, a4), append(seen6, a6)
	}
}
