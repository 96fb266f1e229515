package upstream

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// transportEndpoint parses rawURL the way the configuration does, connecting
// to addr (a loopback server) instead of resolving the URL's host.
func transportEndpoint(t testing.TB, rawURL string, addr netip.AddrPort) Endpoint {
	t.Helper()
	ep, err := ParseEndpoint(rawURL, addr.Addr().String(), "")
	if err != nil {
		t.Fatalf("parse %s: %v", rawURL, err)
	}
	return ep
}

// transportCtx is a generous per-test bound, so a hung exchange fails the test
// instead of the test binary's timeout.
func transportCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func transportQuery(name string) *dns.Msg {
	return new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA)
}

// transportMustExchange sends one A query and checks the answer is for it,
// with the caller's ID restored.
func transportMustExchange(t testing.TB, c Client, name string) *dns.Msg {
	t.Helper()
	q := transportQuery(name)
	q.Id = 0xbeef
	r, err := c.Exchange(transportCtx(t), q)
	if err != nil {
		t.Fatalf("exchange %s: %v", name, err)
	}
	if r.Id != q.Id {
		t.Errorf("response id %#x, want the caller's %#x", r.Id, q.Id)
	}
	if len(r.Answer) != 1 || r.Answer[0].Header().Name != q.Question[0].Name {
		t.Errorf("answer %v, want one record for %s", r.Answer, q.Question[0].Name)
	}
	return r
}

// transportWantKind checks err is an *AttemptError of kind want, naming upstream.
func transportWantKind(t testing.TB, err error, want Kind, upstream string) {
	t.Helper()
	var ae *AttemptError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T), want *AttemptError of kind %v", err, err, want)
	}
	if ae.Kind != want {
		t.Errorf("kind %v (%v), want %v", ae.Kind, err, want)
	}
	if ae.Upstream != upstream {
		t.Errorf("upstream %q, want %q", ae.Upstream, upstream)
	}
}
