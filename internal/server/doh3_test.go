package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/nxdns/nxdns/internal/upstream"
)

// startDoH3Server is a server with DoT, DoH and one DoH3 listener on
// 127.0.0.1 behind p's certificate, answering through st.
func startDoH3Server(t *testing.T, st *State, p *testPKI) (*Server, netip.AddrPort) {
	t.Helper()
	s := startTLSServer(t, st, p)
	if err := s.ListenDoH3([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	return s, netip.MustParseAddrPort(s.DoH3Addrs()[0].String())
}

func doh3URL(addr netip.AddrPort) string {
	return fmt.Sprintf("https://%s:%d/dns-query", testServerName, addr.Port())
}

// h3ClientTo is quic-go's own HTTP/3 client (an implementation nobody here
// wrote) trusting p's CA, dialing addr whatever the URL's host.
func h3ClientTo(t *testing.T, p *testPKI, addr netip.AddrPort) *http.Client {
	t.Helper()
	tr := &http3.Transport{
		TLSClientConfig: p.clientConf.Clone(),
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr.String(), tc, qc)
		},
	}
	t.Cleanup(func() { tr.Close() })
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// GET and POST over HTTP/3 from quic-go's client, and nxdns's own h3://
// upstream client, are answered by the DoH handler and counted as proto h3.
func TestDoH3_answersHTTP3ClientsAndCountsTheProto(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoH3Server(t, state(answerA("192.0.2.11")), p)
	c := h3ClientTo(t, p, addr)
	get := dohGet(t, c, doh3URL(addr), tlsQuery("get.example."))
	if get.ProtoMajor != 3 {
		t.Fatalf("served over %s, want HTTP/3", get.Proto)
	}
	if m := dohAnswer(t, get); len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.11" {
		t.Fatalf("GET answer %v", m)
	}
	if cc := get.Header.Get("Cache-Control"); cc != "max-age=60" {
		t.Errorf("Cache-Control %q, want max-age=60", cc)
	}
	if v := get.Header.Get("Alt-Svc"); v != "" {
		t.Errorf("an HTTP/3 answer advertises Alt-Svc %q", v)
	}
	post, err := c.Post(doh3URL(addr), dohContentType, bytes.NewReader(mustPack(t, tlsQuery("post.example."))))
	if err != nil {
		t.Fatal(err)
	}
	defer post.Body.Close()
	if m := dohAnswer(t, post); len(m.Answer) != 1 || m.Question[0].Name != "post.example." {
		t.Fatalf("POST answer %v", m)
	}

	ep, err := upstream.ParseEndpoint(fmt.Sprintf("h3://%s:%d/dns-query", testServerName, addr.Port()), addr.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	up := upstream.NewDoH3(ep, p.ca.Pool(), nil)
	t.Cleanup(func() { up.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := up.Exchange(ctx, tlsQuery("up.example.")); err != nil || len(resp.Answer) != 1 {
		t.Fatalf("nxdns's h3:// client: %v, %v", resp, err)
	}
	waitFor(t, "three h3 queries counted", func() bool { return protoCount(s, "h3") == 3 })
	if n := protoCount(s, "doh") + protoCount(s, "doq"); n != 0 {
		t.Errorf("%d queries counted under doh or doq", n)
	}
}

// The DoH handler's errors are the same over HTTP/3.
func TestDoH3_badRequestsGetDoHsErrors(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startDoH3Server(t, state(answerA("192.0.2.11")), p)
	c := h3ClientTo(t, p, addr)
	for _, tc := range []struct {
		url  string
		want int
	}{
		{doh3URL(addr) + "?dns=!!", http.StatusBadRequest},
		{fmt.Sprintf("https://%s:%d/other", testServerName, addr.Port()), http.StatusNotFound},
	} {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.url, resp.StatusCode, tc.want)
		}
	}
}

// A client outside dns.allow is refused at its first Initial packet, before
// quic-go starts the TLS handshake, and counted under proto h3.
func TestDoH3_clientOutsideAllowIsRefusedBeforeTheHandshake(t *testing.T) {
	p := newTestPKI(t)
	st := state(answerA("192.0.2.11"))
	st.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	s, addr := startDoH3Server(t, st, p)
	c := h3ClientTo(t, p, addr)
	c.Timeout = 5 * time.Second
	if resp, err := c.Get(doh3URL(addr) + "?dns=AAABAAABAAAAAAAAAWEHZXhhbXBsZQAAAQAB"); err == nil {
		resp.Body.Close()
		t.Fatal("a client outside dns.allow got an answer")
	}
	if s.TLSSnapshot().DoH3.RefusedNotAllowed == 0 {
		t.Error("no refusal counted at the first packet")
	}
	if protoCount(s, "h3") != 0 {
		t.Error("a refused client was served")
	}
}

// One client holds at most tcpClientShare DoH3 connections; the next is
// closed and counted, as for DoQ.
func TestDoH3_connectionsPerClientAreBounded(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoH3Server(t, state(answerA("192.0.2.11")), p)
	dial := func() *quic.Conn { return dialRawH3(t, p, addr) }
	for range tcpClientShare {
		dial()
	}
	key := clientKey(netip.MustParseAddr("127.0.0.1"))
	waitFor(t, "every connection admitted", func() bool {
		d := &s.tls.doh3
		d.conns.mu.Lock()
		defer d.conns.mu.Unlock()
		return d.conns.held[key] == tcpClientShare
	})
	extra := dial()
	select {
	case <-extra.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the connection over the share stayed open")
	}
	var ae *quic.ApplicationError
	if err := context.Cause(extra.Context()); !errors.As(err, &ae) || ae.ErrorCode != quic.ApplicationErrorCode(http3.ErrCodeExcessiveLoad) {
		t.Fatalf("closed with %v, want H3_EXCESSIVE_LOAD", err)
	}
	if got := s.TLSSnapshot().DoH3.RefusedShare; got != 1 {
		t.Errorf("client_share refusals %d, want 1", got)
	}
}

// While doh3_listen is set, DoH/2 answers carry Alt-Svc naming its port
// (RFC 7838); without it, none; and a reload that removes it stops the
// advertisement.
func TestDoH3_altSvcOnDoH2AnswersWhileServed(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.11")), p)
	c := dohClient(t, p.clientConf, false)
	altSvc := func() string {
		resp := dohGet(t, c, dohURL(s), tlsQuery("a.example."))
		dohAnswer(t, resp)
		return resp.Header.Get("Alt-Svc")
	}
	if v := altSvc(); v != "" {
		t.Errorf("Alt-Svc %q without doh3_listen", v)
	}
	if err := s.ListenDoH3([]string{"127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	port := netip.MustParseAddrPort(s.DoH3Addrs()[0].String()).Port()
	if v, want := altSvc(), fmt.Sprintf(`h3=":%d"; ma=86400`, port); v != want {
		t.Errorf("Alt-Svc %q, want %q", v, want)
	}
	if err := s.ListenDoH3(nil); err != nil {
		t.Fatal(err)
	}
	if v := altSvc(); v != "" {
		t.Errorf("Alt-Svc %q after doh3_listen was removed", v)
	}
	if n := len(s.DoH3Addrs()); n != 0 {
		t.Errorf("%d DoH3 listeners after removal", n)
	}
}

// The certificate rotation reaches DoH3 handshakes as it does DoT's.
func TestDoH3_newHandshakesGetTheRotatedCertificate(t *testing.T) {
	p := newTestPKI(t)
	_, addr := startDoH3Server(t, state(answerA("192.0.2.11")), p)
	leaf := p.rotate(t)
	if !p.store.Refresh() {
		t.Fatal("the store did not load the rotated certificate")
	}
	got := dialRawH3(t, p, addr).ConnectionState().TLS.PeerCertificates[0]
	if !got.Equal(leaf) {
		t.Errorf("served certificate serial %s, want the rotated %s", got.SerialNumber, leaf.SerialNumber)
	}
}

// dialRawH3 is a bare QUIC connection with ALPN h3, handshake done, closed
// at cleanup.
func dialRawH3(t *testing.T, p *testPKI, addr netip.AddrPort) *quic.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf := p.clientConf.Clone()
	conf.NextProtos = []string{http3.NextProtoH3}
	c, err := quic.DialAddr(ctx, addr.String(), conf, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseWithError(0, "") })
	return c
}

// A POST over HTTP/3 whose body never finishes is ended (an error status
// or a reset stream) once the request's time is up, as DoH/2's ReadTimeout does
// (dohRequestTimeout) and DoQ's stream read deadline: the client keeps its
// connection alive with PINGs, so QUIC's idle timeout never ends the
// stream, and without a bound the handler waits for the body for ever.
func TestDoH3_stalledBodyEndsAtTheRequestTimeout(t *testing.T) {
	defer func(d time.Duration) { doh3RequestTimeout = d }(doh3RequestTimeout)
	doh3RequestTimeout = 300 * time.Millisecond
	p := newTestPKI(t)
	_, addr := startDoH3Server(t, state(answerA("192.0.2.11")), p)
	tr := &http3.Transport{
		TLSClientConfig: p.clientConf.Clone(),
		QUICConfig:      &quic.Config{KeepAlivePeriod: 100 * time.Millisecond},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddr(ctx, addr.String(), tc, qc)
		},
	}
	defer tr.Close()
	body, stall := io.Pipe()
	defer stall.Close()
	go stall.Write(mustPack(t, tlsQuery("stalled.example."))[:5]) // then nothing more, and no FIN
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, doh3URL(addr), body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", dohContentType)
	resp, err := tr.RoundTrip(req)
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the stalled request was still open when the client gave up: %v", err)
	case err == nil:
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a stalled body was answered 200")
		}
	}
	// Otherwise the server reset the stream: ended, which is the point.
}

// A request stream that never sends its HEADERS is reset with
// H3_REQUEST_INCOMPLETE once doh3RequestTimeout has passed since it
// opened, as DoH/2's ReadHeaderTimeout ends such a request; the client's
// PINGs keep the connection, so nothing else would end the stream, and 16
// such streams would hold the connection's every stream for good.
func TestDoH3_streamWithoutHeadersEndsAtTheRequestTimeout(t *testing.T) {
	defer func(d time.Duration) { doh3RequestTimeout = d }(doh3RequestTimeout)
	doh3RequestTimeout = 300 * time.Millisecond
	p := newTestPKI(t)
	_, addr := startDoH3Server(t, state(answerA("192.0.2.11")), p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conf := p.clientConf.Clone()
	conf.NextProtos = []string{http3.NextProtoH3}
	c, err := quic.DialAddr(ctx, addr.String(), conf, &quic.Config{KeepAlivePeriod: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseWithError(0, "")
	st, err := c.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte{0x01}) // a HEADERS frame's type, then nothing: the stream reaches the server
	st.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(st)
	var se *quic.StreamError
	if !errors.As(err, &se) || !se.Remote || se.ErrorCode != quic.StreamErrorCode(http3.ErrCodeRequestIncomplete) {
		t.Fatalf("stream read: %v; want the server's reset with H3_REQUEST_INCOMPLETE within the request timeout", err)
	}
}
