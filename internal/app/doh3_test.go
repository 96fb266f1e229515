package app

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/upstream"
)

// TestDoH3_servedAndAdvertisedByDDRToKdig: with tls.doq_listen and
// tls.doh3_listen the App serves DoH over HTTP/3 (nxdns's own h3:// client
// gets its answer) and DDR advertises both QUIC services, as kdig reads the
// SVCB answer off the wire; a reload without them stops the advertisement.
func TestDoH3_servedAndAdvertisedByDDRToKdig(t *testing.T) {
	kdig, err := exec.LookPath("kdig")
	if err != nil {
		t.Skip("kdig (knot-dnsutils) not installed")
	}
	r := newRig(t)
	dnsAddr, dotAddr := loopbackAddr(t), loopbackAddr(t)
	doqAddr, doh3Addr := loopbackAddr(t), loopbackAddr(t)
	cfg, _ := r.tlsConfig(t, dnsAddr, dotAddr, "quic")
	cfg.TLS.DoQListen = []string{doqAddr}
	cfg.TLS.DoH3Listen = []string{doh3Addr}
	a := r.start(t, cfg)

	ap := netip.MustParseAddrPort(doh3Addr)
	ep, err := upstream.ParseEndpoint(fmt.Sprintf("h3://dns.home.test:%d/dns-query", ap.Port()), ap.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	c := upstream.NewDoH3(ep, r.ca.Pool(), nil)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if resp, err := c.Exchange(ctx, new(dns.Msg).SetQuestion("example.org.", dns.TypeA)); err != nil || len(resp.Answer) != 1 {
		t.Fatalf("DoH3 through the App: %v, %v", resp, err)
	}

	svcb := func() string {
		host, port, _ := strings.Cut(dnsAddr, ":")
		out, err := exec.Command(kdig, "@"+host, "-p", port, "+short", "+timeout=5", "_dns.resolver.arpa", "SVCB").CombinedOutput()
		if err != nil {
			t.Fatalf("kdig: %v: %s", err, out)
		}
		return string(out)
	}
	out := svcb()
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	for _, want := range []string{
		fmt.Sprintf(`alpn=dot port=%s`, port(dotAddr)),
		fmt.Sprintf(`alpn=h3 port=%s`, port(doh3Addr)),
		fmt.Sprintf(`alpn=doq port=%s`, port(doqAddr)),
		// kdig 3.2 prints dohpath (SvcParamKey 7, RFC 9461) as key7.
		`/dns-query{?dns}`,
	} {
		if !strings.Contains(strings.ReplaceAll(out, `"`, ""), want) {
			t.Errorf("kdig's SVCB answer lacks %s:\n%s", want, out)
		}
	}

	cfg.TLS.DoQListen, cfg.TLS.DoH3Listen = nil, nil
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if out := svcb(); strings.Contains(out, "h3") || strings.Contains(out, "doq") {
		t.Errorf("after a reload without the QUIC listeners, DDR still advertises them:\n%s", out)
	}
}
