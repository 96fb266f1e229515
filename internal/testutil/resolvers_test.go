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
)

// The launchers are checked with third-party clients (miekg/dns, net/http),
// so a failure in the upstream or forward interop tests points at nxdns's
// clients, not at how the resolver was started.

func TestStartUnbound_servesLocalDataOverDoT(t *testing.T) {
	ca := NewCA(t)
	u := StartUnbound(t, ca, UnboundOptions{LocalZone: "nxdns.test.", LocalData: []string{"host.nxdns.test. A 192.0.2.10"}})
	c := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second,
		TLSConfig: &tls.Config{ServerName: u.Name, RootCAs: ca.Pool()}}
	for name, want := range map[string]int{"host.nxdns.test.": dns.RcodeSuccess, "other.nxdns.test.": dns.RcodeNameError, "example.com.": dns.RcodeNameError, ".": dns.RcodeNameError} {
		r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), u.DoTAddr.String())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r.Rcode != want {
			t.Errorf("%s: rcode %s, want %s", name, dns.RcodeToString[r.Rcode], dns.RcodeToString[want])
		}
	}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion("host.nxdns.test.", dns.TypeA), u.DoTAddr.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.10" {
		t.Errorf("answer %v, want A 192.0.2.10", r.Answer)
	}
}

func TestStartUnbound_servesDoHOverHTTP2(t *testing.T) {
	ca := NewCA(t)
	u := StartUnbound(t, ca, UnboundOptions{LocalZone: "nxdns.test.", LocalData: []string{"host.nxdns.test. A 192.0.2.10"}})
	if u.DoHURL == "" {
		t.Skip("unbound is built without nghttp2: no DoH")
	}
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: u.Name, RootCAs: ca.Pool()},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return new(net.Dialer).DialContext(ctx, network, u.DoHAddr.String())
		},
	}
	defer tr.CloseIdleConnections()
	wire, _ := new(dns.Msg).SetQuestion("host.nxdns.test.", dns.TypeA).Pack()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u.DoHURL, bytes.NewReader(wire))
	req.Header.Set("Content-Type", "application/dns-message")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("round trip: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r := new(dns.Msg)
	if err := r.Unpack(body); err != nil {
		t.Fatalf("unpack (HTTP %d): %v", resp.StatusCode, err)
	}
	if resp.ProtoMajor != 2 || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.10" {
		t.Errorf("HTTP/%d, answer %v; want HTTP/2 and A 192.0.2.10", resp.ProtoMajor, r.Answer)
	}
}

func TestStartDnsmasq_servesHostsAndTheirPTR(t *testing.T) {
	d := StartDnsmasq(t, "192.168.1.50 host.lan", "127.0.0.1 laptop.lan")
	c := &dns.Client{Timeout: 5 * time.Second}
	cases := []struct {
		name  string
		q     *dns.Msg
		rcode int
		want  string // the answer's data, "" for none
	}{
		{"A", new(dns.Msg).SetQuestion("host.lan.", dns.TypeA), dns.RcodeSuccess, "192.168.1.50"},
		{"PTR", new(dns.Msg).SetQuestion("50.1.168.192.in-addr.arpa.", dns.TypePTR), dns.RcodeSuccess, "host.lan."},
		{"loopback PTR", new(dns.Msg).SetQuestion("1.0.0.127.in-addr.arpa.", dns.TypePTR), dns.RcodeSuccess, "laptop.lan."},
		// No line, no PTR; with no upstream servers dnsmasq says REFUSED.
		{"no PTR", new(dns.Msg).SetQuestion("51.1.168.192.in-addr.arpa.", dns.TypePTR), -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, _, err := c.Exchange(tc.q, d.Addr.String())
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(r.Answer) > 0 {
				switch rr := r.Answer[0].(type) {
				case *dns.A:
					got = rr.A.String()
				case *dns.PTR:
					got = rr.Ptr
				}
			}
			if (tc.rcode >= 0 && r.Rcode != tc.rcode) || got != tc.want {
				t.Errorf("%s: rcode %s, answer %q; want %q", tc.name, dns.RcodeToString[r.Rcode], got, tc.want)
			}
		})
	}

	// Its query log, which interop tests read to see what a resolver was asked.
	// dnsmasq's log is another process's output: poll it.
	WaitFor(t, "dnsmasq to log the PTR query", 5*time.Second, func() bool { return d.Asked("PTR", "1.0.0.127.in-addr.arpa.") >= 1 })
	if got := d.Asked("PTR", "1.0.0.127.in-addr.arpa."); got != 1 {
		t.Errorf("Asked(PTR 1.0.0.127.in-addr.arpa.) = %d, want 1", got)
	}
	if got := d.Asked("A", "host.lan"); got != 1 {
		t.Errorf("Asked(A host.lan) = %d, want 1", got)
	}
}
