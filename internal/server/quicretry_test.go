package server

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
)

// stallHandshake starts a QUIC handshake with addr that never finishes: a
// quic-go client dials through a relay that passes its first datagram (the
// Initial) to addr and drops everything after, so the server holds one
// handshake in progress until its handshake timeout.
func stallHandshake(t *testing.T, p *testPKI, addr netip.AddrPort, alpn string) {
	t.Helper()
	relay, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 2048)
		first := true
		for {
			n, _, err := relay.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if first {
				first = false
				relay.WriteToUDPAddrPort(buf[:n], addr)
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	wg.Go(func() {
		conf := p.clientConf.Clone()
		conf.NextProtos = []string{alpn}
		quic.DialAddr(ctx, relay.LocalAddr().String(), conf, &quic.Config{})
	})
	t.Cleanup(func() { cancel(); relay.Close(); wg.Wait() })
}

// While the threshold's number of handshakes are in progress, a new client
// is asked to validate its address with a Retry, and a real client (quic-go)
// comes back with the token and is served; the count of handshakes in
// progress falls back when its handshake completes.
func TestDoQ_retryUnderLoadAndTheClientStillConnects(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	h := &s.doq.handshakes
	h.threshold.Store(1)
	c := doqClient(t, p, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Below the threshold: no Retry.
	if _, err := c.Exchange(ctx, newQuery("a.example.", dns.TypeA)); err != nil {
		t.Fatal(err)
	}
	if h.retries.Load() != 0 || h.validated.Load() != 0 {
		t.Fatalf("retries %d, validated %d with no load; want 0, 0", h.retries.Load(), h.validated.Load())
	}
	c.Close()

	stallHandshake(t, p, addr, "doq")
	waitFor(t, "the stalled handshake counted", func() bool { return h.n.Load() == 1 })
	c = doqClient(t, p, addr)
	resp, err := c.Exchange(ctx, newQuery("b.example.", dns.TypeA))
	if err != nil || len(resp.Answer) != 1 {
		t.Fatalf("a client asked to retry: %v, %v; want an answer", resp, err)
	}
	// A ClientHello with a post-quantum key share spans two Initial
	// packets, each answered with a Retry: count packets, not clients.
	if h.retries.Load() == 0 || h.validated.Load() != 1 {
		t.Errorf("retries %d, validated %d; want some, and 1: the client back with its token", h.retries.Load(), h.validated.Load())
	}
	if got := s.TLSSnapshot().DoQ.Retries; got != h.retries.Load() {
		t.Errorf("snapshot retries %d, want %d", got, h.retries.Load())
	}
	waitFor(t, "the completed handshake uncounted", func() bool { return h.n.Load() == 1 })
}

// Under load a client outside dns.allow gets no Retry: it is refused at
// once, statelessly.
func TestDoH3_noRetryForAClientOutsideAllow(t *testing.T) {
	p := newTestPKI(t)
	st := state(answerA("192.0.2.11"))
	st.Allow = []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	s, addr := startDoH3Server(t, st, p)
	s.tls.doh3.handshakes.threshold.Store(-1) // always over
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf := p.clientConf.Clone()
	conf.NextProtos = []string{"h3"}
	if c, err := quic.DialAddr(ctx, addr.String(), conf, &quic.Config{}); err == nil {
		c.CloseWithError(0, "")
		t.Fatal("a client outside dns.allow connected")
	}
	if snap := s.TLSSnapshot().DoH3; snap.Retries != 0 || snap.RefusedNotAllowed == 0 {
		t.Errorf("retries %d, refusals %d; want 0 and at least 1", snap.Retries, snap.RefusedNotAllowed)
	}
}

// A handshake that ends unfinished is counted as DoT's are
// (nxdns_tls_handshake_failures_total): a client offering no ALPN the
// listener speaks is an error at once, one that goes silent mid-handshake a
// timeout at the handshake bound, and a completed handshake neither.
func TestDoQ_failedHandshakesAreCountedByReason(t *testing.T) {
	p := newTestPKI(t)
	s, addr := startDoQServer(t, state(answerA("192.0.2.9")), p)
	doqMustAnswer(t, p, addr)

	stallHandshake(t, p, addr, "doq")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conf := p.clientConf.Clone()
	conf.NextProtos = []string{"h2"}
	if c, err := quic.DialAddr(ctx, addr.String(), conf, &quic.Config{}); err == nil {
		c.CloseWithError(0, "")
		t.Fatal("a client offering only h2 finished a DoQ handshake")
	}
	waitFor(t, "the ALPN failure counted", func() bool { return s.TLSSnapshot().DoQ.HandshakeFailures == 1 })
	// The stalled one ends at the handshake bound, tlsHandshakeTimeout.
	waitFor(t, "the stalled handshake timed out", func() bool { return s.TLSSnapshot().DoQ.HandshakeTimeouts == 1 })
	if snap := s.TLSSnapshot().DoQ; snap.HandshakeFailures != 1 {
		t.Errorf("failures %d after the timeout, want still 1", snap.HandshakeFailures)
	}
}
