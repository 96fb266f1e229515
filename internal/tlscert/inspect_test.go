package tlscert

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/certs"
)

func failed(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		if !f.OK {
			out = append(out, f.What+": "+f.Fix)
		}
	}
	return out
}

func TestInspect_acceptsAChainToATrustedRootCoveringTheName(t *testing.T) {
	p := newPair(t)
	fs := Inspect(p.cert, p.key, "dns.home.example.org", p.ca.Pool(), time.Now())
	if bad := failed(fs); len(bad) > 0 {
		t.Fatalf("failed: %q", bad)
	}
}

func TestInspect_saysWhatToFix(t *testing.T) {
	p := newPair(t)
	now := time.Now()
	cases := []struct {
		name, host string
		roots      bool
		now        time.Time
		setup      func(t *testing.T)
		want       string
	}{
		{name: "untrusted CA", host: "dns.home.example.org", want: "not issued by a public CA"},
		{name: "other name", host: "dns.example.net", roots: true, want: "not dns.example.net"},
		{name: "IP address", host: "192.168.1.2", roots: true, want: "not 192.168.1.2"},
		{name: "expired", host: "dns.home.example.org", roots: true, now: now.Add(100 * 24 * time.Hour), want: "expired: renew it"},
		{name: "soon", host: "dns.home.example.org", roots: true, now: now.Add(80 * 24 * time.Hour), want: "renew it now"},
		{name: "leaf only", host: "dns.home.example.org", roots: true, want: "fullchain.pem", setup: func(t *testing.T) {
			inter, err := certs.NewCA() // the leaf's issuer, signed by nobody the roots know
			if err != nil {
				t.Fatal(err)
			}
			c, err := inter.Issue("dns.home.example.org")
			if err != nil {
				t.Fatal(err)
			}
			c.Certificate = c.Certificate[:1]
			if err := certs.WriteLeafFiles(c, p.cert, p.key); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "key mismatch", host: "dns.home.example.org", roots: true, want: "private key does not match", setup: func(t *testing.T) {
			other := newPair(t)
			b, _ := os.ReadFile(other.key)
			os.WriteFile(p.key, b, 0o600)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.setup != nil {
				c.setup(t)
			}
			when := c.now
			if when.IsZero() {
				when = now
			}
			var fs []Finding
			if c.roots {
				fs = Inspect(p.cert, p.key, c.host, p.ca.Pool(), when)
			} else {
				fs = Inspect(p.cert, p.key, c.host, nil, when) // system roots: the test CA is not among them
			}
			bad := failed(fs)
			if len(bad) == 0 || !strings.Contains(strings.Join(bad, "\n"), c.want) {
				t.Fatalf("failures %q, want one saying %q", bad, c.want)
			}
		})
	}
}
