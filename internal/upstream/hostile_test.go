package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// A DoT or DoH upstream answering TC=1 gives a bad response, never an answer
// to relay (docs/design.md#response-validation, issue 13 finding 13: it was relayed verbatim, to TCP
// clients too).
func TestStreamTransports_TCIsABadResponse(t *testing.T) {
	ca := testutil.NewCA(t)
	tc := func(_ context.Context, q *dns.Msg) *dns.Msg {
		r := new(dns.Msg).SetReply(q)
		r.Truncated = true
		return r
	}
	dot := testutil.StartDoT(t, ca, "dot.test", tc)
	doh := testutil.StartDoH(t, ca, "doh.test", tc)
	for _, c := range []struct {
		url  string
		make func(Endpoint) Client
	}{
		{fmt.Sprintf("tls://dot.test:%d", dot.Addr.Port()), func(ep Endpoint) Client { return NewDoT(ep, ca.Pool(), nil) }},
		{doh.URL("/dns-query"), func(ep Endpoint) Client { return NewDoH(ep, ca.Pool(), nil) }},
	} {
		addr := dot.Addr
		if c.url[0] == 'h' {
			addr = doh.Addr
		}
		cl := c.make(transportEndpoint(t, c.url, addr))
		_, err := cl.Exchange(transportCtx(t), transportQuery("a.example."))
		if Classify(err) != KindBadResponse {
			t.Errorf("%s: TC=1 answer gave %v, want a bad response", c.url, err)
		}
		cl.Close()
	}
}

// An upstream that sends frames for other IDs without end (fakeup
// endless=1) costs the exchange its deadline, not the process.
func TestDoT_endlessUpstreamEndsAtTheDeadline(t *testing.T) {
	ca := testutil.NewCA(t)
	up := testutil.StartDoTWith(t, ca, "dot.test", "endless=1", nil)
	cl := NewDoT(transportEndpoint(t, fmt.Sprintf("tls://dot.test:%d", up.Addr.Port()), up.Addr), ca.Pool(), nil)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := cl.Exchange(ctx, transportQuery("a.example.")); err == nil {
		t.Fatal("an endless upstream produced an answer")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("exchange took %v with a 500 ms deadline", d)
	}
}
