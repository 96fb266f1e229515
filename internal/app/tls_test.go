package app

import (
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/config"
)

// tlsConfig is r.config plus a [tls] section serving DoT on dotAddr with the
// pair written under name.
func (r *rig) tlsConfig(t *testing.T, dnsAddr, dotAddr, name string) (config.Config, *tls.Certificate) {
	t.Helper()
	c, err := r.ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour), "dns.home.test")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(r.dir, name+".pem"), filepath.Join(r.dir, name+"-key.pem")
	if err := certs.WriteLeafFiles(c, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	cfg := r.config(t, dnsAddr, false)
	cfg.TLS = config.TLS{CertFile: certFile, KeyFile: keyFile, DoTListen: []string{dotAddr}}
	if ps := config.Validate(cfg); len(ps) > 0 {
		t.Fatal(ps)
	}
	return cfg, &c
}

func dotAsk(t *testing.T, addr string, r *rig, name string) (*dns.Msg, *tls.ConnectionState) {
	t.Helper()
	c := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second, TLSConfig: &tls.Config{RootCAs: r.ca.Pool(), ServerName: "dns.home.test"}}
	conn, err := c.Dial(addr)
	if err != nil {
		t.Fatalf("DoT dial %s: %v", addr, err)
	}
	defer conn.Close()
	resp, _, err := c.ExchangeWithConn(new(dns.Msg).SetQuestion(name, dns.TypeA), conn)
	if err != nil {
		t.Fatalf("DoT query %s: %v", name, err)
	}
	st := conn.Conn.(*tls.Conn).ConnectionState()
	return resp, &st
}

// TestTLS_startServesDoTAndDDRAndReloadReconciles: the App serves DoT with
// the configured pair, advertises it by DDR, reports the certificate in
// health, takes new files on reload, and stops serving when [tls] goes.
func TestTLS_startServesDoTAndDDRAndReloadReconciles(t *testing.T) {
	r := newRig(t)
	dnsAddr, dotAddr := loopbackAddr(t), loopbackAddr(t)
	cfg, first := r.tlsConfig(t, dnsAddr, dotAddr, "first")
	a := r.start(t, cfg)

	resp, st := dotAsk(t, dotAddr, r, "example.org.")
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 || st.PeerCertificates[0].SerialNumber.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("DoT answer %v (certificate %v)", resp, st.PeerCertificates[0].SerialNumber)
	}
	ddr, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(new(dns.Msg).SetQuestion("_dns.resolver.arpa.", dns.TypeSVCB), dnsAddr)
	if err != nil {
		t.Fatal(err)
	}
	port := dotAddr[strings.LastIndex(dotAddr, ":")+1:]
	if len(ddr.Answer) != 1 || !strings.Contains(ddr.Answer[0].String(), fmt.Sprintf(`alpn="dot" port="%s"`, port)) ||
		!strings.Contains(ddr.Answer[0].String(), "dns.home.test.") {
		t.Fatalf("DDR answer %v, want one DoT SVCB for dns.home.test port %s", ddr.Answer, port)
	}
	if h := a.health(); h.Certificate == nil || h.Certificate.DaysLeft < 88 {
		t.Fatalf("health certificate %+v", h.Certificate)
	}

	next, second := r.tlsConfig(t, dnsAddr, dotAddr, "second")
	if err := a.Reload(next); err != nil {
		t.Fatal(err)
	}
	if _, st := dotAsk(t, dotAddr, r, "example.org."); st.PeerCertificates[0].SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Fatal("after a reload naming new files, a handshake got the old certificate")
	}

	plain := r.config(t, dnsAddr, false)
	if err := a.Reload(plain); err != nil {
		t.Fatal(err)
	}
	if _, err := tls.Dial("tcp", dotAddr, &tls.Config{RootCAs: r.ca.Pool(), ServerName: "dns.home.test"}); err == nil {
		t.Fatal("DoT still served after [tls] was removed")
	}
	if h := a.health(); h.Certificate != nil {
		t.Fatalf("health reports a certificate without TLS serving: %+v", h.Certificate)
	}
}

// TestTLS_unloadablePairFailsStartAndKeepsReload: a pair that does not load
// fails Start (nothing to serve with) and, on reload, keeps what runs.
func TestTLS_unloadablePairFailsStartAndKeepsReload(t *testing.T) {
	r := newRig(t)
	dnsAddr, dotAddr := loopbackAddr(t), loopbackAddr(t)
	bad, _ := r.tlsConfig(t, dnsAddr, dotAddr, "bad")
	bad.TLS.KeyFile = filepath.Join(r.dir, "missing-key.pem")
	if a, err := Start(bad, Options{Logger: r.log}); err == nil {
		shutdown(t, a)
		t.Fatal("Start succeeded with a missing key file")
	} else if !strings.Contains(err.Error(), "missing-key.pem") {
		t.Fatalf("error %v does not name the file", err)
	}
	good, _ := r.tlsConfig(t, dnsAddr, dotAddr, "good")
	a := r.start(t, good)
	bad.TLS.DoTListen = good.TLS.DoTListen
	if err := a.Reload(bad); err == nil {
		t.Fatal("a reload with a missing key file succeeded")
	}
	if resp, _ := dotAsk(t, dotAddr, r, "example.org."); resp.Rcode != dns.RcodeSuccess {
		t.Fatalf("after the rejected reload: %v", resp)
	}
}
