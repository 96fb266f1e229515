package vmtests

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// DoH over HTTP/3 between the real binary and an implementation nobody here
// wrote, in both directions (docs/server.md "DoH over HTTP/3"): ngtcp2's
// example programs as Debian 12 ships them (ngtcp2 0.12, nghttp3 0.8,
// GnuTLS), a QUIC and HTTP/3 stack with no code in common with quic-go.
// gtlsclient (ngtcp2-client) asks nxdns's doh3_listen; gtlsserver
// (ngtcp2-server), a static file server, is an h3:// upstream. Neither is a
// DNS program: the test builds the DoH requests and answers (RFC 8484 §4.1)
// itself. gtlsclient 0.12 has no option for a CA or for request headers: it
// does not verify nxdns's certificate (TestServedDoH3 does that with
// quic-go's client) and cannot send a POST's Content-Type. .ci/run installs
// both packages; each subtest skips when its program is missing.

// TestServedDoH3Ngtcp2: gtlsclient's GET gets the pool's answer with the
// query's ID, logged and counted as proto h3; its POST, which carries no
// Content-Type, gets 415; and a second connection that resumes the TLS
// session and sends its query as 0-RTT is refused the early data (nxdns
// accepts none, docs/server.md) and gets its answer over 1-RTT, once.
func TestServedDoH3Ngtcp2(t *testing.T) {
	skipShort(t)
	bin := tool(t, "gtlsclient", "ngtcp2-client")
	ca := newTestCA(t)
	doh3 := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), testutil.FreePort(t))
	n := startTLSNode(t, ca, nil, startUpstream(t, ca, "dot://127.0.0.1:0"), fmt.Sprintf("doh3_listen = [%q]\n", doh3))
	c := gtlsClient{bin: bin, addr: doh3}

	t.Run("GET", func(t *testing.T) {
		name := "ngtcp2-get.example.org."
		q := new(dns.Msg).SetQuestion(name, dns.TypeA)
		q.Id = 0x4e47 // not 0: the answer must carry the query's own ID
		r := c.get(t, q)
		if r.status != 200 {
			t.Fatalf("status %d, want 200\n%s", r.status, r.out)
		}
		wantAnswer(t, r, q)
		if line := n.queryLog(t, name, 1)[0]; line["proto"] != "h3" {
			t.Errorf("query log proto %v, want h3", line["proto"])
		}
		if got := metric(n.metrics(t), "nxdns_queries_by_proto_total", "proto", "h3"); got < 1 {
			t.Errorf("nxdns_queries_by_proto_total{proto=\"h3\"} = %v, want at least 1", got)
		}
	})

	t.Run("POST without Content-Type", func(t *testing.T) {
		// RFC 8484 §4.1: a POST's body is application/dns-message and says
		// so; gtlsclient sends only content-length.
		wire, err := new(dns.Msg).SetQuestion("ngtcp2-post.example.org.", dns.TypeA).Pack()
		if err != nil {
			t.Fatal(err)
		}
		body := filepath.Join(t.TempDir(), "query")
		if err := os.WriteFile(body, wire, 0o644); err != nil {
			t.Fatal(err)
		}
		r := c.run(t, c.url("/dns-query"), "-m", "POST", "--data="+body)
		if r.status != 415 {
			t.Fatalf("status %d, want 415\n%s", r.status, r.out)
		}
	})

	t.Run("0-RTT refused, 1-RTT answers", func(t *testing.T) {
		dir := t.TempDir()
		resume := []string{"--session-file=" + filepath.Join(dir, "session"), "--tp-file=" + filepath.Join(dir, "tp")}
		first := new(dns.Msg).SetQuestion("ngtcp2-ticket.example.org.", dns.TypeA)
		if r := c.get(t, first, resume...); r.status != 200 || strings.Contains(r.out, "0RTT") {
			t.Fatalf("first connection: status %d, want 200 without 0-RTT\n%s", r.status, r.out)
		}
		before := metric(n.metrics(t), "nxdns_queries_by_proto_total", "proto", "h3")
		name := "ngtcp2-0rtt.example.org."
		q := new(dns.Msg).SetQuestion(name, dns.TypeA)
		q.Id = 0 // as RFC 8484 §4.1 recommends
		r := c.get(t, q, resume...)
		// ngtcp2's log: the request went out in a 0-RTT packet, and the
		// server's handshake said no to it.
		if !strings.Contains(r.out, "0RTT STREAM") || !strings.Contains(r.out, "Early data was rejected by server") {
			t.Fatalf("gtlsclient did not send 0-RTT, or nxdns accepted it\n%s", r.out)
		}
		if r.status != 200 {
			t.Fatalf("status %d, want 200 over 1-RTT\n%s", r.status, r.out)
		}
		wantAnswer(t, r, q)
		// Answered once: the rejected 0-RTT copy never reached the handler.
		testutil.WaitFor(t, "the 0-RTT query counted", 10*time.Second, func() bool {
			return metric(n.metrics(t), "nxdns_queries_by_proto_total", "proto", "h3") >= before+1
		})
		if lines := n.queryLog(t, name, 1); len(lines) != 1 || lines[0]["proto"] != "h3" {
			t.Errorf("query log %v, want one h3 line", lines)
		}
		if got := metric(n.metrics(t), "nxdns_queries_by_proto_total", "proto", "h3"); got != before+1 {
			t.Errorf("nxdns_queries_by_proto_total{proto=\"h3\"} went from %v to %v, want one more", before, got)
		}
	})
}

// gtlsClient runs ngtcp2's HTTP/3 client against nxdns's DoH3 listener.
type gtlsClient struct {
	bin  string
	addr netip.AddrPort
}

// gtlsResult is one gtlsclient run: the response's status and body, and
// its log for failure reports.
type gtlsResult struct {
	status int
	body   []byte
	out    string
}

var gtlsStatus = regexp.MustCompile(`\[:status: (\d+)\]`)

func (c gtlsClient) url(path string) string {
	return fmt.Sprintf("https://dns.home.test:%d%s", c.addr.Port(), path)
}

// get sends q as an RFC 8484 GET: ?dns= its wire form in unpadded base64url.
func (c gtlsClient) get(t *testing.T, q *dns.Msg, args ...string) gtlsResult {
	t.Helper()
	wire, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return c.run(t, c.url("/dns-query?dns="+base64.RawURLEncoding.EncodeToString(wire)), args...)
}

// run makes one connection with one request for url and returns once the
// stream has closed; the body is what --download saved.
func (c gtlsClient) run(t *testing.T, url string, args ...string) gtlsResult {
	t.Helper()
	dir := t.TempDir()
	args = append(args, "--no-quic-dump", "--no-http-dump", "--exit-on-all-streams-close",
		"--timeout=5s", "--handshake-timeout=5s", "--download="+dir, "--sni=dns.home.test",
		c.addr.Addr().String(), strconv.Itoa(int(c.addr.Port())), url)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.bin, args...).CombinedOutput()
	r := gtlsResult{out: string(out)}
	if err != nil {
		t.Fatalf("gtlsclient: %v\n%s", err, out)
	}
	if m := gtlsStatus.FindStringSubmatch(r.out); m != nil {
		r.status, _ = strconv.Atoi(m[1])
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 1 {
		r.body, err = os.ReadFile(filepath.Join(dir, files[0].Name()))
		if err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// wantAnswer: r's body is a DNS answer to q with q's ID and the fake
// upstream's address for the name.
func wantAnswer(t *testing.T, r gtlsResult, q *dns.Msg) {
	t.Helper()
	m := new(dns.Msg)
	if err := m.Unpack(r.body); err != nil {
		t.Fatalf("body %x: %v\n%s", r.body, err, r.out)
	}
	if m.Id != q.Id || !m.Response || len(m.Question) != 1 || m.Question[0] != q.Question[0] {
		t.Fatalf("answer ID %#04x, question %v; want ID %#04x for %v", m.Id, m.Question, q.Id, q.Question[0])
	}
	wantA(t, m, fakeup.AddressV4(q.Question[0].Name).String())
}

// TestUpstreamDoH3Ngtcp2: nxdns's h3:// upstream resolves through
// gtlsserver. That server serves files, whatever the method, so every
// request, nxdns's POSTs included, gets one prepared answer: ID 0 (nxdns
// sends ID 0, RFC 8484 §4.1, and checks the answer carries it), served as
// application/dns-message (by the file's extension: nxdns refuses any other
// media type), to the question ". NS" — the one nxdns's start-up probe
// asks (docs/upstream-pool.md), so the probe succeeds too and the upstream
// stays out of backoff.
func TestUpstreamDoH3Ngtcp2(t *testing.T) {
	skipShort(t)
	bin := tool(t, "gtlsserver", "ngtcp2-server")
	ca := newTestCA(t)
	dir := t.TempDir()
	leaf, err := ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), "dns.home.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "key.pem")
	if err := certs.WriteLeafFiles(leaf, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	ans := new(dns.Msg).SetQuestion(".", dns.TypeNS)
	ans.Id, ans.Response, ans.RecursionAvailable = 0, true, true
	ans.Answer = []dns.RR{&dns.NS{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: 300}, Ns: "ns.ngtcp2.test."}}
	wire, err := ans.Pack()
	if err != nil {
		t.Fatal(err)
	}
	htdocs := filepath.Join(dir, "htdocs")
	mimeTypes := filepath.Join(dir, "mime.types")
	if err := os.Mkdir(htdocs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(htdocs, "answer.dns"), wire, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mimeTypes, []byte("application/dns-message dns\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := testutil.FreePort(t)
	srv := exec.Command(bin, "-q", "--htdocs="+htdocs, "--mime-types-file="+mimeTypes,
		"127.0.0.1", strconv.Itoa(int(port)), keyFile, certFile)
	var out strings.Builder // read only after Wait
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Process.Kill()
		srv.Wait()
		if t.Failed() {
			t.Logf("gtlsserver's output:\n%s", out.String())
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	// Ready once it completes a handshake: it prints nothing when it binds.
	testutil.WaitFor(t, "gtlsserver's first handshake", 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		conn, err := quic.DialAddr(ctx, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "dns.home.test", NextProtos: []string{http3.NextProtoH3}}, nil)
		if err != nil {
			return false
		}
		conn.CloseWithError(0, "")
		return true
	})

	p := startNxdns(t, ca, settings{queryLog: true}, &upstreamNode{url: "h3://" + addr + "/answer.dns", tlsName: "dns.home.test"})
	r := p.ask(t, "udp", ".", dns.TypeNS)
	if ns, ok := singleRR(r).(*dns.NS); !ok || ns.Ns != "ns.ngtcp2.test." {
		t.Fatalf("%s %v, want gtlsserver's NS ns.ngtcp2.test.\n%s", dns.RcodeToString[r.Rcode], r.Answer, p.logs.String())
	}
	if line := p.queryLog(t, ".", 1)[0]; line["source"] != "pool" || !strings.HasPrefix(fmt.Sprint(line["upstream"]), "h3://"+addr) {
		t.Errorf("query log %v: want the answer from the pool through the h3:// upstream", line)
	}
	// The start-up probe got the same answer; nothing counted against
	// the upstream.
	testutil.WaitFor(t, "a successful start-up probe", 10*time.Second, func() bool {
		return metric(p.metrics(t), "nxdns_upstream_probes_total", "outcome", "success") >= 1
	})
	fams := p.metrics(t)
	if ok, bad := metric(fams, "nxdns_upstream_requests_total", "outcome", "success"), metric(fams, "nxdns_upstream_requests_total", "outcome", "failure")+metric(fams, "nxdns_upstream_probes_total", "outcome", "failure"); ok < 1 || bad != 0 {
		t.Errorf("%v successful requests, %v failed requests and probes; want at least 1 and 0\n%s", ok, bad, p.logs.String())
	}
	if got := p.logs.count("entering backoff"); got != 0 {
		t.Errorf("%d backoff episodes against gtlsserver\n%s", got, p.logs.String())
	}
}

// singleRR is r's one answer record, or nil.
func singleRR(r *dns.Msg) dns.RR {
	if len(r.Answer) != 1 {
		return nil
	}
	return r.Answer[0]
}
