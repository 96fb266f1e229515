package server

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"

	"github.com/miekg/dns"
)

// TestTLS_certificateRotation: after the files change and the store
// refreshes, new DoT and DoH handshakes get the new certificate, while a DoT
// connection and an HTTP/2 connection opened before keep working on theirs.
// A bad new pair then keeps the good one.
func TestTLS_certificateRotation(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.20")), p)
	old := p.store.Leaf()

	dot := dialDoT(t, dotAddr(s), p.clientConf)
	h2 := dohClient(t, p.clientConf, false)
	if r := dohGet(t, h2, dohURL(s), tlsQuery("before.example.")); !sameCert(r.TLS.PeerCertificates[0], old) || r.ProtoMajor != 2 {
		t.Fatalf("before rotation: HTTP/%d.%d, certificate %v", r.ProtoMajor, r.ProtoMinor, r.TLS.PeerCertificates[0].SerialNumber)
	}

	renewed := p.rotate(t)
	if !p.store.Refresh() {
		t.Fatal("the store did not take the new files")
	}

	// Connections opened before still answer, on the old certificate.
	dot.WriteMsg(tlsQuery("old-dot.example."))
	if resp := readMsg(t, dot); len(resp.Answer) != 1 {
		t.Fatalf("old DoT connection: %v", resp)
	}
	if pc := dot.Conn.(*tls.Conn).ConnectionState().PeerCertificates[0]; !sameCert(pc, old) {
		t.Fatal("the old DoT connection changed certificate")
	}
	r := dohGet(t, h2, dohURL(s), tlsQuery("old-h2.example."))
	if !sameCert(r.TLS.PeerCertificates[0], old) {
		t.Fatal("the HTTP/2 request did not reuse the connection opened before the rotation")
	}
	if m := dohAnswer(t, r); len(m.Answer) != 1 {
		t.Fatalf("old HTTP/2 connection: %v", m)
	}

	// New handshakes get the new one.
	if pc := dialDoT(t, dotAddr(s), p.clientConf).Conn.(*tls.Conn).ConnectionState().PeerCertificates[0]; !sameCert(pc, renewed) {
		t.Fatal("a new DoT handshake got the old certificate")
	}
	fresh := dohGet(t, dohClient(t, p.clientConf, false), dohURL(s), tlsQuery("new-h2.example."))
	if !sameCert(fresh.TLS.PeerCertificates[0], renewed) {
		t.Fatal("a new DoH handshake got the old certificate")
	}

	// A bad new pair (a truncated chain) keeps the renewed one serving.
	if err := os.WriteFile(p.cert, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.store.Refresh() {
		t.Fatal("the store took a bad pair")
	}
	c := dialDoT(t, dotAddr(s), p.clientConf)
	if pc := c.Conn.(*tls.Conn).ConnectionState().PeerCertificates[0]; !sameCert(pc, renewed) {
		t.Fatal("after a bad pair, a handshake did not get the last good certificate")
	}
	c.WriteMsg(tlsQuery("after-bad.example."))
	if resp := readMsg(t, c); resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("after a bad pair: %v", resp)
	}
}

func sameCert(a, b *x509.Certificate) bool { return a.SerialNumber.Cmp(b.SerialNumber) == 0 }

// TestListenTLS_reconciles: a kept address keeps its listener and its open
// connection; a removed one stops; a bind failure changes nothing.
func TestListenTLS_reconciles(t *testing.T) {
	p := newTestPKI(t)
	s := startTLSServer(t, state(answerA("192.0.2.21")), p)
	dotA := dotAddr(s)
	c := dialDoT(t, dotA, p.clientConf)
	_, doh := s.TLSAddrs()
	busy := doh[0].String() // taken by the DoH listener: binding it for DoT fails
	// Listeners are kept by their configured address ("127.0.0.1:0" here).
	if err := s.ListenTLS([]string{"127.0.0.1:0", busy}, nil, nil); err == nil {
		t.Fatal("binding a taken address succeeded")
	}
	if d, h := s.TLSAddrs(); len(d) != 1 || len(h) != 1 {
		t.Fatalf("a failed ListenTLS changed the listeners: %v %v", d, h)
	}
	if err := s.ListenTLS([]string{"127.0.0.1:0"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if d, h := s.TLSAddrs(); len(d) != 1 || d[0].String() != dotA || len(h) != 0 {
		t.Fatalf("listeners %v %v, want DoT %s only", d, h, dotA)
	}
	c.WriteMsg(tlsQuery("kept.example."))
	if resp := readMsg(t, c); len(resp.Answer) != 1 {
		t.Fatalf("connection on the kept listener: %v", resp)
	}
}
