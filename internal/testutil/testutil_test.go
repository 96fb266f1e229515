package testutil

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The servers are checked with third-party clients (miekg/dns, net/http), so
// the transport tests that use them do not test a server against itself.

func TestDoTServer_answersThroughMiekgClient(t *testing.T) {
	ca := NewCA(t)
	srv := StartDoT(t, ca, "dot.test", AnswerA("192.0.2.1"))
	c := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second,
		TLSConfig: &tls.Config{ServerName: "dot.test", RootCAs: ca.Pool()}}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion("a.example.", dns.TypeA), srv.Addr.String())
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Errorf("answer = %v, want A 192.0.2.1", r.Answer)
	}
	if srv.Accepts() != 1 || srv.Handshakes() != 1 || srv.Queries() != 1 {
		t.Errorf("accepts, handshakes, queries = %d, %d, %d; want 1, 1, 1", srv.Accepts(), srv.Handshakes(), srv.Queries())
	}
}

func TestDoTServer_faultsApplyOnceInOrder(t *testing.T) {
	ca := NewCA(t)
	srv := StartDoT(t, ca, "dot.test", AnswerA("192.0.2.1"))
	conn, err := tls.Dial("tcp", srv.Addr.String(), &tls.Config{ServerName: "dot.test", RootCAs: ca.Pool()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	dc := &dns.Conn{Conn: conn}
	srv.FailNext(FaultWrongID)
	q := new(dns.Msg).SetQuestion("a.example.", dns.TypeA)
	for i, wantSameID := range []bool{false, true} {
		if err := dc.WriteMsg(q); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if got := r.Id == q.Id; got != wantSameID {
			t.Errorf("query %d: same id = %v, want %v", i, got, wantSameID)
		}
	}
}

func TestDoHServer_answersOverHTTP2(t *testing.T) {
	ca := NewCA(t)
	srv := StartDoH(t, ca, "doh.test", AnswerA("192.0.2.2"))
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: "doh.test", RootCAs: ca.Pool()},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return new(net.Dialer).DialContext(ctx, network, srv.Addr.String())
		},
	}
	defer tr.CloseIdleConnections()
	wire, _ := new(dns.Msg).SetQuestion("b.example.", dns.TypeA).Pack()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL("/dns-query"), bytes.NewReader(wire))
	req.Header.Set("Content-Type", "application/dns-message")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	if resp.ProtoMajor != 2 || srv.HTTP2Requests() != 1 || srv.Connections() != 1 {
		t.Errorf("proto %d, h2 requests %d, connections %d; want 2, 1, 1", resp.ProtoMajor, srv.HTTP2Requests(), srv.Connections())
	}
	if len(r.Answer) != 1 {
		t.Errorf("answer = %v, want one A", r.Answer)
	}
}

// FreePort never names a port twice in one binary, each port it names can
// be bound for TCP and UDP, and none lies in the kernel's ephemeral range,
// where the ports other binaries' listeners and connections are given
// come from.
func TestFreePort_distinctBindableAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi := freePortRange()
	seen := map[uint16]bool{}
	for range 300 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d named twice", p)
		}
		seen[p] = true
		if int(p) < lo || int(p) >= hi {
			t.Fatalf("port %d outside [%d, %d)", p, lo, hi)
		}
	}
	for p := range seen {
		if !portFree(p) {
			t.Errorf("port %d not bindable for both TCP and UDP", p)
		}
	}
}
