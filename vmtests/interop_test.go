package vmtests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// Interop through the real binary with resolvers nobody here wrote: unbound
// as an encrypted upstream (docs/design.md#dot-client, docs/design.md#doh-client), dnsmasq as the household router
// behind the forward zones and the source of learned client names (docs/design.md#learned-names,
// docs/design.md#forward-zones). Each test skips when its resolver is not installed.

// TestInteropUnbound: an A query for a name in unbound's local zone, sent to
// nxdns over UDP and TCP, comes back with unbound's local data, over DoT and
// (when unbound has nghttp2) DoH, verified against the test's CA by ca_file.
func TestInteropUnbound(t *testing.T) {
	skipShort(t)
	ca := newTestCA(t)
	u := testutil.StartUnbound(t, ca.CA, testutil.UnboundOptions{
		LocalZone: "nxdns.test.",
		LocalData: []string{"host.nxdns.test. A 192.0.2.10"},
	})
	type transport struct {
		name, url string
		logged    string // the url as the query log redacts it: no path
	}
	trs := []transport{{"DoT", "tls://" + u.DoTAddr.String(), "tls://" + u.DoTAddr.String()}}
	if u.DoHURL != "" {
		trs = append(trs, transport{"DoH", "https://" + u.DoHAddr.String() + "/dns-query", "https://" + u.DoHAddr.String()})
	} else {
		t.Log("unbound is built without nghttp2: it serves no DoH, so only DoT is tested")
	}
	for _, tr := range trs {
		t.Run(tr.name, func(t *testing.T) {
			p := startNxdns(t, ca, settings{queryLog: true}, &upstreamNode{url: tr.url, tlsName: u.Name})
			for _, network := range []string{"udp", "tcp"} {
				wantA(t, p.ask(t, network, "host.nxdns.test.", dns.TypeA), "192.0.2.10")
			}
			// The first query (UDP) goes to the pool; the second (TCP) is the
			// cache's. Lines may arrive in either order: match them by proto.
			lines := p.queryLog(t, "host.nxdns.test.", 2)
			if line := lineWith(t, lines, "proto", "udp"); line["source"] != "pool" || line["rcode"] != "NOERROR" || line["upstream"] != tr.logged {
				t.Errorf("query log %v: want source pool, NOERROR, upstream %s", line, tr.logged)
			}
			if line := lineWith(t, lines, "proto", "tcp"); line["source"] != "cache" || line["rcode"] != "NOERROR" {
				t.Errorf("query log %v: want the second answer from the cache", line)
			}
			// The start-up probe (". NS") runs as nxdns starts, and unbound
			// answers it: no backoff episode. (While the launcher refused ".",
			// one was logged before the first query's line.)
			if got := p.logs.count("entering backoff"); got != 0 {
				t.Errorf("%d backoff episodes against a serving unbound\n%s", got, p.logs.String())
			}
		})
	}
}

// TestInteropDnsmasqZones: with forward zones "lan" and its reverse zone
// pointing at dnsmasq, host.lan's A record and its PTR resolve through nxdns,
// and the query log names the zone's resolver (docs/design.md#forward-zones).
func TestInteropDnsmasqZones(t *testing.T) {
	skipShort(t)
	lan := testutil.StartDnsmasq(t, "192.168.1.50 host.lan")
	for _, scheme := range []string{"udp", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			ca := newTestCA(t)
			resolver := scheme + "://" + lan.Addr.String()
			p := startNxdns(t, ca, settings{queryLog: true, extra: forwardZones(resolver, "lan", "168.192.in-addr.arpa")},
				startUpstream(t, ca, "dot://127.0.0.1:0"))

			for _, network := range []string{"udp", "tcp"} {
				wantA(t, p.ask(t, network, "host.lan.", dns.TypeA), "192.168.1.50")
			}
			r := p.ask(t, "udp", "50.1.168.192.in-addr.arpa.", dns.TypePTR)
			if len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != "host.lan." {
				t.Errorf("PTR 50.1.168.192.in-addr.arpa: %s %v, want host.lan.", dns.RcodeToString[r.Rcode], r.Answer)
			}

			// Each name's first query (UDP) goes to its zone; host.lan's
			// second (TCP) is answered by the cache. Lines may arrive in
			// either order: match them by proto.
			hosts := p.queryLog(t, "host.lan.", 2)
			ptrs := p.queryLog(t, "50.1.168.192.in-addr.arpa.", 1)
			for source, line := range map[string]map[string]any{
				"zone:lan":                  lineWith(t, hosts, "proto", "udp"),
				"zone:168.192.in-addr.arpa": lineWith(t, ptrs, "proto", "udp"),
			} {
				if line["source"] != source || line["upstream"] != resolver {
					t.Errorf("query log %v: want source %s, upstream %s", line, source, resolver)
				}
			}
			if line := lineWith(t, hosts, "proto", "tcp"); line["source"] != "cache" {
				t.Errorf("query log %v: want the repeated query from the cache", line)
			}
		})
	}
}

// TestInteropLearnedClientName: dnsmasq knows 127.0.0.1 as laptop.lan. The
// first query from 127.0.0.1 is answered without a name (its PTR lookup
// starts in the background and never delays it); a later query's log line
// carries the learned name, and one lookup serves every later query.
func TestInteropLearnedClientName(t *testing.T) {
	skipShort(t)
	lan := testutil.StartDnsmasq(t, "192.168.1.50 host.lan", "127.0.0.1 laptop.lan", barrierHost)
	p := startNamesNxdns(t, lan, "")

	wantA(t, p.ask(t, "udp", "host.lan.", dns.TypeA), "192.168.1.50")
	if first := p.queryLog(t, "host.lan.", 1)[0]; first["client"] != "127.0.0.1" || first["client_name"] != nil {
		t.Errorf("first query's line %v: want client 127.0.0.1 and no client_name (the answer does not wait for the lookup)", first)
	}

	// The lookup runs in another process: poll by asking again.
	start := time.Now()
	n := 1
	testutil.WaitFor(t, "a query log line carrying client_name laptop.lan", 10*time.Second, func() bool {
		n++
		wantA(t, p.ask(t, "udp", "host.lan.", dns.TypeA), "192.168.1.50")
		// Lines may arrive out of query order: look at every one of them.
		learned := false
		for _, line := range p.queryLog(t, "host.lan.", n) {
			switch line["client_name"] {
			case "laptop.lan":
				learned = true
			case nil:
			default:
				t.Fatalf("line %v: client_name is not laptop.lan", line)
			}
		}
		return learned
	})
	t.Logf("learned laptop.lan by query %d, %v after the first", n, time.Since(start).Round(time.Millisecond))
	p.barrier(t, lan)
	if got := lan.Asked("PTR", "1.0.0.127.in-addr.arpa."); got != 1 {
		t.Errorf("dnsmasq was asked 127.0.0.1's PTR %d times, want 1: a learned name is cached", got)
	}
}

// TestInteropStaticClientName: a [[clients]] entry for 127.0.0.1 wins over the
// PTR record dnsmasq has for it, from the first query on, and nxdns never
// asks for the PTR.
func TestInteropStaticClientName(t *testing.T) {
	skipShort(t)
	lan := testutil.StartDnsmasq(t, "192.168.1.50 host.lan", "127.0.0.1 laptop.lan", barrierHost)
	p := startNamesNxdns(t, lan, "[[clients]]\nip = \"127.0.0.1\"\nname = \"static-box\"\n")

	const queries = 4
	for range queries {
		wantA(t, p.ask(t, "udp", "host.lan.", dns.TypeA), "192.168.1.50")
	}
	for i, line := range p.queryLog(t, "host.lan.", queries) {
		if line["client_name"] != "static-box" {
			t.Errorf("query %d's line %v: want client_name static-box", i+1, line)
		}
	}
	p.barrier(t, lan)
	if got := lan.Asked("PTR", "1.0.0.127.in-addr.arpa."); got != 0 {
		t.Errorf("dnsmasq was asked 127.0.0.1's PTR %d times, want 0: a static name needs no lookup", got)
	}
}

// TestInteropClientNameLookupFails: dnsmasq has no PTR for 127.0.0.1 (it
// answers REFUSED: no record, no upstream). The failed lookup changes nothing
// for the client: every query is answered and logged without a name, and the
// failure is remembered rather than retried on each query.
func TestInteropClientNameLookupFails(t *testing.T) {
	skipShort(t)
	lan := testutil.StartDnsmasq(t, "192.168.1.50 host.lan", barrierHost)
	p := startNamesNxdns(t, lan, "")

	wantA(t, p.ask(t, "udp", "host.lan.", dns.TypeA), "192.168.1.50")
	testutil.WaitFor(t, "nxdns to ask dnsmasq for 127.0.0.1's PTR", 10*time.Second, func() bool {
		return lan.Asked("PTR", "1.0.0.127.in-addr.arpa.") >= 1
	})
	const queries = 4 // the first, then three after the failed lookup
	for range queries - 1 {
		wantA(t, p.ask(t, "udp", "host.lan.", dns.TypeA), "192.168.1.50")
	}
	for i, line := range p.queryLog(t, "host.lan.", queries) {
		if line["rcode"] != "NOERROR" || line["client_name"] != nil {
			t.Errorf("query %d's line %v: want NOERROR and no client_name", i+1, line)
		}
	}
	p.barrier(t, lan)
	if got := lan.Asked("PTR", "1.0.0.127.in-addr.arpa."); got != 1 {
		t.Errorf("dnsmasq was asked 127.0.0.1's PTR %d times, want 1: a failed lookup is remembered as no name", got)
	}
}

// barrierHost is a name only barrier asks for.
const barrierHost = "192.168.1.99 barrier.lan"

// barrier returns once dnsmasq has logged a query sent after everything the
// test did so far. dnsmasq serves one query at a time and logs it on
// arrival, so a PTR lookup nxdns started during the test's queries shows in
// its log before this one.
func (p *nxdnsProc) barrier(t *testing.T, lan *testutil.Dnsmasq) {
	t.Helper()
	wantA(t, p.ask(t, "udp", "barrier.lan.", dns.TypeA), "192.168.1.99")
	testutil.WaitFor(t, "dnsmasq to log the barrier query", 10*time.Second, func() bool {
		return lan.Asked("A", "barrier.lan.") >= 1
	})
}

// startNamesNxdns serves "lan" and "127.in-addr.arpa" from dnsmasq, so nxdns
// learns 127.0.0.1's name through the reverse zone, with the query log on.
// The fake upstream is only there because nxdns needs one.
func startNamesNxdns(t *testing.T, lan *testutil.Dnsmasq, extra string) *nxdnsProc {
	t.Helper()
	ca := newTestCA(t)
	zones := forwardZones("udp://"+lan.Addr.String(), "lan", "127.in-addr.arpa")
	return startNxdns(t, ca, settings{queryLog: true, extra: zones + extra}, startUpstream(t, ca, "dot://127.0.0.1:0"))
}

// forwardZones is the TOML for zones all served by one resolver.
func forwardZones(resolver string, zones ...string) string {
	var b strings.Builder
	for _, z := range zones {
		fmt.Fprintf(&b, "[[forward_zones]]\nzone = %q\nresolver = %q\n", z, resolver)
	}
	return b.String()
}

// ask sends one query to nxdns with miekg's client over network ("udp",
// "tcp"); an exchange error ends the test.
func (p *nxdnsProc) ask(t *testing.T, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 5 * time.Second}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, qtype), p.dns)
	if err != nil {
		t.Fatalf("%s %s over %s: %v", dns.TypeToString[qtype], name, network, err)
	}
	return r
}

func wantA(t *testing.T, r *dns.Msg, ip string) {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%s: %s %v, want one A %s", r.Question[0].Name, dns.RcodeToString[r.Rcode], r.Answer, ip)
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != ip {
		t.Fatalf("%s: answer %v, want A %s", r.Question[0].Name, r.Answer[0], ip)
	}
}

// queryLog waits until the query log holds at least n lines for name and
// returns them, each line's fields decoded, in the order they were logged.
// That need not be query order: nxdns records a query after its answer is
// sent, so the next query's line can come first, and this test reads
// nxdns's stderr through a pipe, a moment behind. Callers match lines by
// their fields (lineWith), not by position.
func (p *nxdnsProc) queryLog(t *testing.T, name string, n int) []map[string]any {
	t.Helper()
	sub := fmt.Sprintf(`"name": %q`, name)
	var lines []string
	testutil.WaitFor(t, fmt.Sprintf("%d query log lines for %s", n, name), 10*time.Second, func() bool {
		lines = p.logs.matching("server.query", sub)
		return len(lines) >= n
	})
	out := make([]map[string]any, len(lines))
	for i, line := range lines {
		// Console encoding: time, level, logger, message, then the fields as JSON.
		j := strings.IndexByte(line, '{')
		if j < 0 || json.Unmarshal([]byte(line[j:]), &out[i]) != nil {
			t.Fatalf("query log line without JSON fields: %s", line)
		}
	}
	return out
}

// lineWith is the one line among lines whose field key is value; none, or
// more than one, ends the test.
func lineWith(t *testing.T, lines []map[string]any, key, value string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, line := range lines {
		if line[key] != value {
			continue
		}
		if found != nil {
			t.Fatalf("query log: more than one line with %s %s: %v and %v", key, value, found, line)
		}
		found = line
	}
	if found == nil {
		t.Fatalf("query log: no line with %s %s among %v", key, value, lines)
	}
	return found
}
