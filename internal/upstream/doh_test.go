package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/testutil"
)

// dohTestToken stands for an account token in a DoH URL's path and query:
// it must never appear in an error (docs/design.md#redaction, docs/design.md#listeners).
const dohTestToken = "s3cr3t-t0ken"

const dohTestPath = "/dns-query/" + dohTestToken + "?key=" + dohTestToken

// dohTestSetup starts a DoH server with a certificate for serverName and a
// client for https://doh.test:port/<token path>, closed at cleanup.
func dohTestSetup(t *testing.T, serverName string, h testutil.Handler) (*testutil.DoHServer, *DoH) {
	t.Helper()
	ca := testutil.NewCA(t)
	srv := testutil.StartDoH(t, ca, serverName, h)
	ep := transportEndpoint(t, fmt.Sprintf("https://doh.test:%d%s", srv.Addr.Port(), dohTestPath), srv.Addr)
	c := NewDoH(ep, ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// dohTestNoToken fails the test if err's text carries the URL's token.
func dohTestNoToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), dohTestToken) {
		t.Errorf("error text leaks the URL token: %q", err.Error())
	}
}

func TestDoH_exchangeRestoresIDOverHTTP2(t *testing.T) {
	srv, c := dohTestSetup(t, "doh.test", testutil.AnswerA("192.0.2.2"))
	transportMustExchange(t, c, "a.example.")
	transportMustExchange(t, c, "b.example.")
	if srv.Connections() != 1 || srv.HTTP2Requests() != 2 {
		t.Errorf("connections %d, HTTP/2 requests %d; want 1, 2", srv.Connections(), srv.HTTP2Requests())
	}
}

// Concurrent exchanges are streams on one HTTP/2 connection: a cold burst
// of 30 against an upstream 30 ms away takes about one round trip.
func TestDoH_multiplexesConcurrentExchangesOnOneConnection(t *testing.T) {
	const n, rtt = 30, 30 * time.Millisecond
	srv, c := dohTestSetup(t, "doh.test", testutil.AnswerA("192.0.2.2"))
	srv.SetDelay(rtt)
	start := time.Now()
	dotTestBurst(t, c, n, "doh")
	elapsed := time.Since(start)
	if budget := rtt + 300*time.Millisecond; elapsed > budget {
		t.Errorf("%d concurrent exchanges took %v, want under %v (about one %v round trip)", n, elapsed, budget, rtt)
	}
	if srv.Connections() != 1 {
		t.Errorf("connections %d, want 1: exchanges multiplex on one HTTP/2 connection", srv.Connections())
	}
	if srv.HTTP2Requests() != n {
		t.Errorf("HTTP/2 requests %d, want %d", srv.HTTP2Requests(), n)
	}
}

func TestDoH_badResponsesArePeerFaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault testutil.Fault
		want  Kind
	}{
		{"status 500", testutil.FaultStatus500, KindBadResponse},
		{"wrong content type", testutil.FaultContentType, KindBadResponse},
		{"oversized body", testutil.FaultOversized, KindResponseTooLarge},
		{"wrong ID", testutil.FaultWrongID, KindResponseMismatch},
		{"wrong question", testutil.FaultWrongQuestion, KindResponseMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, c := dohTestSetup(t, "doh.test", testutil.AnswerA("192.0.2.2"))
			srv.FailNext(tc.fault)
			_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
			transportWantKind(t, err, tc.want, c.name)
			if !errors.Is(err, ErrPeerFault) {
				t.Errorf("error %v is not a peer fault", err)
			}
			dohTestNoToken(t, err)
			transportMustExchange(t, c, "b.example.") // the client is still usable
		})
	}
}

func TestDoH_certificateForAnotherNameNeverSendsTheQuery(t *testing.T) {
	srv, c := dohTestSetup(t, "other.test", testutil.AnswerA("192.0.2.2"))
	_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
	transportWantKind(t, err, KindNetwork, c.name)
	dohTestNoToken(t, err)
	if srv.Requests() != 0 {
		t.Errorf("server saw %d requests, want 0", srv.Requests())
	}
}

// The token never reaches an error, whatever the failure: refused
// connection, expiry, cancellation, close.
func TestDoH_urlTokenNeverInErrors(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr).AddrPort()
		ln.Close() // nothing listens there now
		base := fmt.Sprintf("https://doh.test:%d", addr.Port())
		ep := transportEndpoint(t, base+dohTestPath, addr)
		c := NewDoH(ep, testutil.NewCA(t).Pool(), nil)
		defer c.Close()
		_, err = c.Exchange(transportCtx(t), transportQuery("a.example."))
		transportWantKind(t, err, KindNetwork, base)
		dohTestNoToken(t, err)
	})
	t.Run("attempt expired", func(t *testing.T) {
		_, c := dohTestSetup(t, "doh.test", func(context.Context, *dns.Msg) *dns.Msg { return nil })
		ctx, cancel := context.WithTimeoutCause(transportCtx(t), 100*time.Millisecond, KindAttemptExpired)
		defer cancel()
		_, err := c.Exchange(ctx, transportQuery("stall.example."))
		transportWantKind(t, err, KindAttemptExpired, c.name)
		dohTestNoToken(t, err)
	})
	t.Run("closed client", func(t *testing.T) {
		_, c := dohTestSetup(t, "doh.test", testutil.AnswerA("192.0.2.2"))
		c.Close()
		_, err := c.Exchange(transportCtx(t), transportQuery("a.example."))
		transportWantKind(t, err, KindCanceled, c.name)
		dohTestNoToken(t, err)
	})
	t.Run("scrubbed when a cause quotes the URL", func(t *testing.T) {
		_, c := dohTestSetup(t, "doh.test", testutil.AnswerA("192.0.2.2"))
		err := c.error(transportCtx(t), errors.New("Post "+c.url+": boom"))
		dohTestNoToken(t, err)
		if err.Kind != KindNetwork {
			t.Errorf("kind %v, want %v", err.Kind, KindNetwork)
		}
	})
}

func TestDoH_closeEndsBusyConnections(t *testing.T) {
	received := make(chan struct{}, 1)
	srv, c := dohTestSetup(t, "doh.test", func(ctx context.Context, q *dns.Msg) *dns.Msg {
		received <- struct{}{}
		<-ctx.Done()
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.Exchange(transportCtx(t), transportQuery("stall.example."))
		done <- err
	}()
	<-received
	c.Close()
	transportWantKind(t, <-done, KindCanceled, c.name)
	if srv.Connections() != 1 {
		t.Errorf("connections %d, want 1", srv.Connections())
	}
}

// A black-holed connection (the path went silent, nothing was closed) is
// abandoned within the HTTP/2 health check's bounds, so a probe that follows
// runs on a new connection instead of reusing the dead one until the
// kernel's TCP timeout.
func TestDoH_abandonsSilentConnectionWithinPingBounds(t *testing.T) {
	ca := testutil.NewCA(t)
	srv := testutil.StartDoH(t, ca, "doh.test", testutil.AnswerA("192.0.2.2"))
	px := startTCPProxy(t, srv.Addr)
	ep := transportEndpoint(t, fmt.Sprintf("https://doh.test:%d/dns-query", px.Addr.Port()), px.Addr)
	c := NewDoH(ep, ca.Pool(), nil)
	t.Cleanup(func() { c.Close() })
	transportMustExchange(t, c, "a.example.")

	px.silence()
	start := time.Now()
	// A probe into the black hole: it rides the existing connection and fails.
	ctx, cancel := context.WithTimeoutCause(transportCtx(t), time.Second, KindAttemptExpired)
	_, err := c.Exchange(ctx, transportQuery("lost.example."))
	cancel()
	if err == nil {
		t.Fatal("exchange through a black hole succeeded")
	}
	// The margin absorbs -race and two shared cores; without the health
	// check the connection lives until transportIdleTimeout (20 s) or longer.
	bound := dohPingAfter + dohPingTimeout
	if !px.conn(t, 0).waitClientGone(bound + 2*time.Second) {
		t.Fatalf("silent connection still open %v after it went silent, want closed within about %v",
			time.Since(start).Round(time.Millisecond), bound)
	}
	t.Logf("silent connection closed after %v (bound %v)", time.Since(start).Round(time.Millisecond), bound)

	transportMustExchange(t, c, "b.example.")
	if px.Accepts() != 2 || srv.Connections() != 2 {
		t.Errorf("proxy accepts %d, server connections %d; want 2, 2: the exchange after ran on a new connection",
			px.Accepts(), srv.Connections())
	}
}
