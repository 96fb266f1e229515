package local

import (
	"context"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// TestWildcard_exactRecordWinsAndTheClosestEncloserDecides is the
// precedence of docs/local.md "Wildcards" (RFC 4592 where it applies to a
// forwarder): the wildcard answers names below its parent under the name
// asked, an exact record (of any type) wins, a name below another existing
// name or an empty non-terminal is not matched, nor is the parent itself.
func TestWildcard_exactRecordWinsAndTheClosestEncloserDecides(t *testing.T) {
	s, err := New(Options{Records: []string{
		"*.lab.home.arpa. 300 IN A 192.168.1.20",
		"*.lab.home.arpa. 300 IN AAAA fd00::20",
		"nas.lab.home.arpa. 300 IN A 192.168.1.50",
		`printer.lab.home.arpa. 300 IN TXT "no address"`,
		"x.deep.lab.home.arpa. 300 IN A 192.168.1.60",
		"*.apps.lab.home.arpa. 300 IN CNAME traefik.lab.home.arpa.",
	},
		// The router's forward zone covers home.arpa: what the local data
		// does not answer goes there (else nxdns answers the special-use
		// zone itself, docs/local.md).
		Covered: func(name string) bool { return strings.HasSuffix(name, ".home.arpa.") }})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		qtype uint16
		want  string // the answer section, "" for NODATA, "pass" when passed on
	}{
		{"grafana.lab.home.arpa.", dns.TypeA, "grafana.lab.home.arpa. A 192.168.1.20"},
		{"Grafana.Lab.home.arpa.", dns.TypeA, "Grafana.Lab.home.arpa. A 192.168.1.20"},
		{"a.b.lab.home.arpa.", dns.TypeAAAA, "a.b.lab.home.arpa. AAAA fd00::20"},
		{"grafana.lab.home.arpa.", dns.TypeMX, ""},                             // the wildcard has no MX: NODATA
		{"nas.lab.home.arpa.", dns.TypeA, "nas.lab.home.arpa. A 192.168.1.50"}, // exact wins
		{"nas.lab.home.arpa.", dns.TypeAAAA, ""},                               // exact, no AAAA: NODATA, not the wildcard's
		{"printer.lab.home.arpa.", dns.TypeA, ""},                              // exact of another type wins
		{"www.nas.lab.home.arpa.", dns.TypeA, "pass"},                          // below an existing name
		{"deep.lab.home.arpa.", dns.TypeA, "pass"},                             // an empty non-terminal
		{"y.deep.lab.home.arpa.", dns.TypeA, "pass"},                           // below one
		{"lab.home.arpa.", dns.TypeA, "pass"},                                  // the parent itself
		{"other.home.arpa.", dns.TypeA, "pass"},
		{"whoami.apps.lab.home.arpa.", dns.TypeA, "whoami.apps.lab.home.arpa. CNAME traefik.lab.home.arpa.|traefik.lab.home.arpa. A 192.168.1.20"},
	} {
		n := &counter{}
		req := new(dns.Msg).SetQuestion(tc.name, tc.qtype)
		resp, err := s.Answer(context.Background(), &query.Request{Msg: req, Event: &query.Event{}}, n)
		if err != nil {
			t.Fatal(err)
		}
		ev := &query.Event{Name: tc.name, Qtype: tc.qtype, Qclass: dns.ClassINET}
		if tc.want == "pass" {
			if n.n != 1 || !s.Passes(ev, nil) {
				t.Errorf("%s %s: answered locally, want it passed on", tc.name, dns.TypeToString[tc.qtype])
			}
			continue
		}
		if n.n != 0 || s.Passes(ev, nil) {
			t.Errorf("%s %s: passed on, want a local answer", tc.name, dns.TypeToString[tc.qtype])
			continue
		}
		var got []string
		for _, rr := range resp.Answer {
			f := strings.Fields(rr.String())
			got = append(got, f[0]+" "+f[3]+" "+strings.Join(f[4:], " "))
		}
		if strings.Join(got, "|") != tc.want || resp.Rcode != dns.RcodeSuccess || !resp.Authoritative {
			t.Errorf("%s %s: %s %v, want %q", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[resp.Rcode], got, tc.want)
		}
		if tc.want == "" && len(resp.Ns) != 1 {
			t.Errorf("%s: NODATA without its SOA", tc.name)
		}
	}
	// The wildcard's stored record is never renamed by an answer.
	if got := s.names["*.lab.home.arpa."].rrs[0].Header().Name; got != "*.lab.home.arpa." {
		t.Errorf("the wildcard's own record was renamed to %s", got)
	}
	// No PTR points back at a wildcard.
	if o := s.names["20.1.168.192.in-addr.arpa."]; o != nil {
		t.Errorf("a PTR derived from a wildcard: %v", o.rrs)
	}
}

// TestWildcard_badWildcardsAreRefusedWithTheReason: "*" elsewhere than as
// the first label, and a wildcard for the root, are configuration
// problems naming the record.
func TestWildcard_badWildcardsAreRefusedWithTheReason(t *testing.T) {
	for rec, want := range map[string]string{
		"a.*.lab.home.arpa. A 192.168.1.1": "only as the whole first label",
		"*x.lab.home.arpa. A 192.168.1.1":  "only as the whole first label",
		"*.*.home.arpa. A 192.168.1.1":     "only as the whole first label",
		"* A 192.168.1.1":                  "every name",
	} {
		if _, msg := config.ParseRecord(rec); !strings.Contains(msg, want) {
			t.Errorf("%q: %q, want a message containing %q", rec, msg, want)
		}
		if _, err := New(Options{Records: []string{rec}}); err == nil {
			t.Errorf("%q: the stage took it", rec)
		}
	}
}

type counter struct{ n int }

func (c *counter) Answer(_ context.Context, r *query.Request) (*dns.Msg, error) {
	c.n++
	return new(dns.Msg).SetReply(r.Msg), nil
}
