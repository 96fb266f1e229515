package app

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
)

// TestQuery_certificateFailureReachesTheClientInWords: an upstream whose CA
// the configuration does not trust answers the client SERVFAIL with EDE 23
// naming the upstream and the fix, not "network error" (issue 16, finding 16).
func TestQuery_certificateFailureReachesTheClientInWords(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	path := r.write(t, fmt.Sprintf(`[dns]
listen = [%q]
[web]
listen = ""
[log]
queries = false
[[upstreams]]
url = %q
tls_name = "upstream.test"
`, addr, r.dotURL)) // no ca_file: the rig's CA is unknown to the system roots
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r.start(t, cfg)
	m := new(dns.Msg).SetQuestion("example.org.", dns.TypeA)
	m.SetEdns0(1232, false)
	c := &dns.Client{Net: "udp", Timeout: 8 * time.Second}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[resp.Rcode])
	}
	var text string
	for _, o := range resp.IsEdns0().Option {
		if e, ok := o.(*dns.EDNS0_EDE); ok && e.InfoCode == dns.ExtendedErrorCodeNetworkError {
			text = e.ExtraText
		}
	}
	for _, want := range []string{r.dotURL, "certificate signed by unknown authority: set ca_file"} {
		if !strings.Contains(text, want) {
			t.Errorf("EDE 23 text %q lacks %q", text, want)
		}
	}
}
