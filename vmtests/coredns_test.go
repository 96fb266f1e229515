package vmtests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/upstream"
)

// DNS over QUIC (RFC 9250) between the real binary and CoreDNS, a DoQ
// client and server nobody here wrote (docs/server.md "DNS over QUIC",
// docs/decisions/quic-library.md "Interop with CoreDNS"): CoreDNS v1.15.0
// built from its Go module with only the plugins these Corefiles name
// (scripts/interop/coredns). Its DoQ server (`quic://` server blocks) and
// the DoQ client of its forward plugin are its own code on quic-go, the
// QUIC library nxdns uses too; the DNS-over-QUIC framing, stream handling,
// error codes and connection reuse above QUIC are not ours. Every
// certificate is verified against the test's CA, in both directions.
//
// The binary: $NXDNS_COREDNS, else `coredns` on PATH, else the tests skip.
// .ci/interop.sh builds it and sets NXDNS_COREDNS, and a binary named there
// that does not run fails the test rather than skipping it.

// corednsAnswer is the address CoreDNS's template answers every A query
// under coredns.test with: not the fake upstream's 198.18.0.0/15, so an
// answer that came from anywhere else cannot pass.
const corednsAnswer = "198.51.100.53"

// corednsZone is the Corefile body of a CoreDNS server block that is
// authoritative for coredns.test: A, and TXT with bigTXTRecords strings of
// 200 octets, about 4 kB in one answer, more than the 1232 bytes nxdns
// advertises where a UDP path may be involved (internal/server/handler.go
// upstreamUDPSize). And for ". NS", the question of nxdns's start-up
// probe (docs/upstream-pool.md), so the probe succeeds and the upstream
// stays out of backoff.
var corednsZone = `    template IN A coredns.test {
        answer "{{ .Name }} 60 IN A ` + corednsAnswer + `"
    }
    template IN TXT coredns.test {
` + strings.Repeat(`        answer "{{ .Name }} 60 IN TXT `+strings.Repeat("x", 200)+"\"\n", bigTXTRecords) + `    }
    template IN NS . {
        answer ". 60 IN NS ns.coredns.test."
    }
    log
    errors
`

// bigTXTRecords is how many TXT records CoreDNS answers under coredns.test.
const bigTXTRecords = 20

// bigRecords is how many A records TestServedDoQCoreDNS's large local
// answer has.
const bigRecords = 100

// corednsBinary is the CoreDNS binary to run, or the test skips.
func corednsBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("NXDNS_COREDNS"); bin != "" {
		// CI said it is there: a missing or broken binary is a failure.
		out, err := exec.Command(bin, "-version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "CoreDNS-") {
			t.Fatalf("NXDNS_COREDNS=%s does not run: %v\n%s", bin, err, out)
		}
		return bin
	}
	bin, err := exec.LookPath("coredns")
	if err != nil {
		t.Skip("no CoreDNS: set NXDNS_COREDNS or put coredns on PATH (.ci/interop.sh builds it from scripts/interop/coredns)")
	}
	return bin
}

// startCoreDNS runs CoreDNS with corefile and returns once it has bound
// every server block: it prints its version line after all listeners are
// open. Its output is logged when the test fails.
func startCoreDNS(t *testing.T, bin, corefile string) {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-conf", conf)
	cmd.Dir = dir
	out := &logLines{}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		out.drain(stdout)
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("CoreDNS's output:\n%s\nCorefile:\n%s", out.String(), corefile)
		}
	})
	testutil.WaitFor(t, "CoreDNS listening", 15*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("CoreDNS exited at start-up:\n%s\nCorefile:\n%s", out.String(), corefile)
		default:
		}
		return out.count("CoreDNS-") > 0
	})
}

// corednsCert writes a leaf from ca for coredns.test and 127.0.0.1 and
// returns its certificate and key files.
func corednsCert(t *testing.T, ca testCA) (certFile, keyFile string) {
	t.Helper()
	leaf, err := ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), "coredns.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "key.pem")
	if err := certs.WriteLeafFiles(leaf, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// kdigUDP asks addr (host:port) for name A over UDP with kdig and returns
// its output.
func kdigUDP(t *testing.T, addr, name string) string {
	t.Helper()
	return kdigAsk(t, addr, name, "+notcp", "A")
}

// kdigAsk is kdigUDP with kdig's transport flag (+notcp, +tcp) and the
// query type given.
func kdigAsk(t *testing.T, addr, name, transport, qtype string) string {
	t.Helper()
	kdig := tool(t, "kdig", "knot-dnsutils")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run(t, kdig, "@"+host, "-p", port, transport, "+timeout=5", "+retry=0", name, qtype)
	if err != nil {
		t.Fatalf("kdig @%s %s: %v\n%s", addr, name, err, out)
	}
	return out
}

// TestUpstreamDoQCoreDNS: nxdns's quic:// upstream is CoreDNS's DoQ
// server, authoritative for coredns.test. kdig asks nxdns over UDP and gets
// CoreDNS's answer; the query log names the quic:// upstream, and the
// upstream's metrics count a new QUIC connection and successful requests
// with no failure; a 4 kB TXT answer arrives whole. Then the same through
// an h3:// upstream to CoreDNS's DoH over HTTP/3 server. An nxdns that
// trusts another CA gets no answer from either: it verifies CoreDNS's
// certificate.
func TestUpstreamDoQCoreDNS(t *testing.T) {
	skipShort(t)
	bin := corednsBinary(t)
	ca := newTestCA(t)
	certFile, keyFile := corednsCert(t, ca)
	doq, doh3 := testutil.FreePort(t), testutil.FreePort(t)
	startCoreDNS(t, bin, fmt.Sprintf("quic://.:%d {\n    bind 127.0.0.1\n    tls %s %s\n%s}\n"+
		"https3://.:%d {\n    bind 127.0.0.1\n    tls %s %s\n%s}\n",
		doq, certFile, keyFile, corednsZone, doh3, certFile, keyFile, corednsZone))
	for _, c := range []struct{ name, url string }{
		{"DoQ", fmt.Sprintf("quic://127.0.0.1:%d", doq)},
		{"DoH3", fmt.Sprintf("h3://127.0.0.1:%d/dns-query", doh3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := &upstreamNode{url: c.url, tlsName: "coredns.test"}
			label := upstream.RedactString(c.url) // as the query log and metrics name it
			p := startNxdns(t, ca, settings{queryLog: true}, up)
			name := "nxdns-" + strings.ToLower(c.name) + ".coredns.test."
			out := kdigUDP(t, p.dns, name)
			if !strings.Contains(out, "NOERROR") || !strings.Contains(out, corednsAnswer) {
				t.Fatalf("kdig through nxdns: want NOERROR with CoreDNS's %s\n%s\nnxdns:\n%s", corednsAnswer, out, p.logs.String())
			}
			if line := p.queryLog(t, name, 1)[0]; line["source"] != "pool" || line["upstream"] != label {
				t.Errorf("query log %v: want the answer from the pool through %s", line, c.url)
			}
			testutil.WaitFor(t, "a successful start-up probe", 10*time.Second, func() bool {
				return metric(p.metrics(t), "nxdns_upstream_probes_total", "url", label, "outcome", "success") >= 1
			})
			fams := p.metrics(t)
			if got := metric(fams, "nxdns_upstream_connections_total", "url", label, "outcome", "new"); got < 1 {
				t.Errorf("nxdns_upstream_connections_total{url=%q,outcome=\"new\"} = %v, want at least 1", label, got)
			}
			ok := metric(fams, "nxdns_upstream_requests_total", "url", label, "outcome", "success")
			bad := metric(fams, "nxdns_upstream_requests_total", "url", label, "outcome", "failure") +
				metric(fams, "nxdns_upstream_probes_total", "url", label, "outcome", "failure")
			if ok < 1 || bad != 0 {
				t.Errorf("%v successful requests, %v failed requests and probes; want at least 1 and 0\n%s", ok, bad, p.logs.String())
			}

			// An answer larger than any UDP size: RFC 9250 §4.6 has DoQ
			// ignore the EDNS UDP size, but CoreDNS sizes its DoQ and DoH3
			// answers by it as over UDP and sets TC above it, which nxdns
			// refuses over a stream; nxdns advertises 65535 on the QUIC
			// transports, and gets the whole answer.
			big := "big-" + strings.ToLower(c.name) + ".coredns.test."
			out = kdigAsk(t, p.dns, big, "+tcp", "TXT")
			if !strings.Contains(out, "NOERROR") || !strings.Contains(out, fmt.Sprintf("ANSWER: %d;", bigTXTRecords)) {
				t.Errorf("%s TXT over TCP through nxdns: want NOERROR with CoreDNS's %d records\n%s\nnxdns:\n%s", big, bigTXTRecords, out, p.logs.String())
			}
			fams = p.metrics(t)
			if bad := metric(fams, "nxdns_upstream_requests_total", "url", label, "outcome", "failure"); bad != 0 {
				t.Errorf("%v failed requests after the large answer, want 0", bad)
			}

			// Another CA: the handshake fails, the query gets no answer
			// from CoreDNS.
			other := startNxdns(t, newTestCA(t), settings{queryLog: true, attemptMS: 1000, totalMS: 2000}, up)
			name = "untrusted-" + strings.ToLower(c.name) + ".coredns.test."
			out = kdigUDP(t, other.dns, name)
			if !strings.Contains(out, "SERVFAIL") || strings.Contains(out, corednsAnswer) {
				t.Fatalf("nxdns trusting another CA: want SERVFAIL, not CoreDNS's answer\n%s\nnxdns:\n%s", out, other.logs.String())
			}
			if got := metric(other.metrics(t), "nxdns_upstream_connections_total", "url", label, "outcome", "failed"); got < 1 {
				t.Errorf("nxdns_upstream_connections_total{outcome=\"failed\"} = %v, want the failed handshake counted\n%s", got, other.logs.String())
			}
		})
	}
}

// TestServedDoQCoreDNS: CoreDNS's forward plugin sends kdig's UDP query
// over DoQ to nxdns's doq_listen, verifying nxdns's certificate against the
// test CA and the name dns.home.test; nxdns answers from its pool (the fake
// upstream), and its query log says the query arrived as proto doq, twice
// (the second on CoreDNS's cached connection or a new one, as it chooses).
// A CoreDNS that trusts another CA gets SERVFAIL and never reaches nxdns's
// handler: CoreDNS verifies nxdns's certificate.
func TestServedDoQCoreDNS(t *testing.T) {
	skipShort(t)
	bin := corednsBinary(t)
	ca := newTestCA(t)
	doq := testutil.FreePort(t)
	// big.home.arpa: a local name whose answer (100 A records) is larger
	// than any EDNS UDP size a client advertises here.
	var big strings.Builder
	big.WriteString("[local]\nrecords = [\n")
	for i := 1; i <= bigRecords; i++ {
		fmt.Fprintf(&big, "  \"big.home.arpa. 300 IN A 192.0.2.%d\",\n", i)
	}
	big.WriteString("]\n")
	n := startTLSNode(t, ca, nil, startUpstream(t, ca, "dot://127.0.0.1:0"), fmt.Sprintf("doq_listen = [\"127.0.0.1:%d\"]\n", doq)+big.String())
	trusting, untrusting := testutil.FreePort(t), testutil.FreePort(t)
	forward := func(port uint16, caFile string) string {
		return fmt.Sprintf(".:%d {\n    bind 127.0.0.1\n    forward . quic://127.0.0.1:%d {\n        tls %s\n        tls_servername dns.home.test\n    }\n    log\n    errors\n}\n", port, doq, caFile)
	}
	startCoreDNS(t, bin, forward(trusting, ca.file)+forward(untrusting, newTestCA(t).file))
	coredns := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(trusting)))

	for i, name := range []string{"coredns-doq.example.org.", "coredns-doq-again.example.org."} {
		out := kdigUDP(t, coredns, name)
		want := fakeup.AddressV4(name).String()
		if !strings.Contains(out, "NOERROR") || !strings.Contains(out, want) {
			t.Fatalf("query %d, kdig through CoreDNS: want NOERROR with %s from nxdns's pool\n%s\nnxdns:\n%s", i+1, want, out, n.logs.String())
		}
		if line := n.queryLog(t, name, 1)[0]; line["proto"] != "doq" || line["source"] != "pool" {
			t.Errorf("query log %v: want proto doq, source pool", line)
		}
	}
	if got := metric(n.metrics(t), "nxdns_queries_by_proto_total", "proto", "doq"); got < 2 {
		t.Errorf("nxdns_queries_by_proto_total{proto=\"doq\"} = %v, want at least 2", got)
	}

	// RFC 9250 §4.6: DoQ ignores the EDNS UDP size and never truncates.
	// CoreDNS forwards kdig's TCP query as it is, without EDNS, which over
	// UDP would cap the answer at 512 bytes; over DoQ all 100 records
	// reach CoreDNS (and kdig), TC clear.
	out := kdigAsk(t, coredns, "big.home.arpa.", "+tcp", "A")
	if !strings.Contains(out, fmt.Sprintf("ANSWER: %d;", bigRecords)) || strings.Contains(out, " tc ") {
		t.Errorf("big.home.arpa through CoreDNS over DoQ: want %d records, TC clear\n%s", bigRecords, out)
	}

	name := "coredns-untrusted.example.org."
	out = kdigUDP(t, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(untrusting))), name)
	if !strings.Contains(out, "SERVFAIL") || strings.Contains(out, fakeup.AddressV4(name).String()) {
		t.Fatalf("CoreDNS trusting another CA: want SERVFAIL, not nxdns's answer\n%s", out)
	}
	if lines := n.logs.matching("server.query", fmt.Sprintf(`"name": %q`, name)); len(lines) != 0 {
		t.Errorf("nxdns answered CoreDNS over an unverified connection: %v", lines)
	}
}
