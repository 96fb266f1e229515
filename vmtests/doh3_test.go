package vmtests

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestServedDoH3: the real binary serves DoH over HTTP/3 on
// tls.doh3_listen behind the DoT/DoH certificate (docs/server.md "DoH over
// HTTP/3"). quic-go's own HTTP/3 client gets the pool's answer, verified
// against the test CA and dns.home.test, logged as proto h3; the DoH/2
// answers advertise the port in Alt-Svc; and a second nxdns with that
// listener as its h3:// upstream resolves through it (nxdns's DoH3 client
// against nxdns's DoH3 server, both real binaries). curl is no HTTP/3 client
// here: Debian 12's 7.88.1 is built without it (`curl -V` lists no HTTP3).
func TestServedDoH3(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	doh3 := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), testutil.FreePort(t))
	n := startTLSNode(t, ca, nil, startUpstream(t, ca, "dot://127.0.0.1:0"), fmt.Sprintf("doh3_listen = [%q]\n", doh3))

	t.Run("quic-go http3 client", func(t *testing.T) {
		tr := &http3.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "dns.home.test"},
			Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
				return quic.DialAddr(ctx, doh3.String(), tc, qc)
			},
		}
		defer tr.Close()
		name := "h3-client.example.org."
		wire, err := new(dns.Msg).SetQuestion(name, dns.TypeA).Pack()
		if err != nil {
			t.Fatal(err)
		}
		c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		resp, err := c.Get(fmt.Sprintf("https://dns.home.test:%d/dns-query?dns=%s", doh3.Port(), base64.RawURLEncoding.EncodeToString(wire)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		m := new(dns.Msg)
		if resp.ProtoMajor != 3 || resp.StatusCode != http.StatusOK || m.Unpack(body) != nil {
			t.Fatalf("%s %d: %q", resp.Proto, resp.StatusCode, body)
		}
		if want := fakeup.AddressV4(name).String(); len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != want {
			t.Fatalf("answer %v, want %s", m.Answer, want)
		}
		if line := n.queryLog(t, name, 1)[0]; line["proto"] != "h3" {
			t.Errorf("query log proto %v, want h3", line["proto"])
		}
	})

	t.Run("Alt-Svc on DoH/2", func(t *testing.T) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "dns.home.test"}, ForceAttemptHTTP2: true}}
		wire, _ := new(dns.Msg).SetQuestion("alt-svc.example.org.", dns.TypeA).Pack()
		resp, err := c.Get("https://" + n.doh + "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(wire))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := fmt.Sprintf(`h3=":%d"; ma=86400`, doh3.Port()); resp.ProtoMajor != 2 || resp.Header.Get("Alt-Svc") != want {
			t.Errorf("%s answer Alt-Svc %q, want %q over HTTP/2", resp.Proto, resp.Header.Get("Alt-Svc"), want)
		}
	})

	t.Run("nxdns h3 upstream", func(t *testing.T) {
		b := startNxdns(t, ca, settings{queryLog: true}, &upstreamNode{
			url: fmt.Sprintf("h3://127.0.0.1:%d/dns-query", doh3.Port()), tlsName: "dns.home.test"})
		name := "through-h3.example.org."
		r := b.ask(t, "udp", name, dns.TypeA)
		if want := fakeup.AddressV4(name).String(); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != want {
			t.Fatalf("answer %v, want %s", r.Answer, want)
		}
		if line := b.queryLog(t, name, 1)[0]; !strings.HasPrefix(fmt.Sprint(line["upstream"]), "h3://127.0.0.1:") {
			t.Errorf("query log upstream %v, want the h3:// upstream", line["upstream"])
		}
		if line := n.queryLog(t, name, 1)[0]; line["proto"] != "h3" {
			t.Errorf("serving node's query log proto %v, want h3", line["proto"])
		}
	})

	t.Run("curl", func(t *testing.T) {
		curl := tool(t, "curl", "curl")
		out, _ := exec.Command(curl, "-V").Output()
		if !strings.Contains(string(out), "HTTP3") {
			t.Skip("this curl is built without HTTP/3 (Debian 12's 7.88.1 is)")
		}
		name := "curl-h3.example.org."
		wire, _ := new(dns.Msg).SetQuestion(name, dns.TypeA).Pack()
		got, err := run(t, curl, "--http3-only", "-sS", "--cacert", n.ca.file,
			"--resolve", fmt.Sprintf("dns.home.test:%d:127.0.0.1", doh3.Port()),
			fmt.Sprintf("https://dns.home.test:%d/dns-query?dns=%s", doh3.Port(), base64.RawURLEncoding.EncodeToString(wire)))
		m := new(dns.Msg)
		if err != nil || m.Unpack([]byte(got)) != nil || len(m.Answer) != 1 {
			t.Fatalf("curl --http3-only: %v: %q", err, got)
		}
	})
}
