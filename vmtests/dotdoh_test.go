package vmtests

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// Real clients nobody here wrote, resolving through the real binary's DoT
// and DoH listeners (docs/design.md#tls-serving): kdig +tls and +https, and curl --doh-url,
// each verifying nxdns's certificate against the test CA, never skipping
// verification. A test skips when its tool is not installed (.ci/run
// installs knot-dnsutils, curl and dnsmasq-base).

// tlsNode is nxdns serving DoT and DoH with a certificate from ca for
// dns.home.test and 127.0.0.1, plus a forward zone "lan" when lan is set.
type tlsNode struct {
	*nxdnsProc
	dot, doh string // host:port
	ca       testCA
}

func startTLSNxdns(t *testing.T, lan *testutil.Dnsmasq) *tlsNode {
	t.Helper()
	ca := newTestCA(t)
	return startTLSNxdnsWith(t, ca, lan, startUpstream(t, ca, "dot://127.0.0.1:0"))
}

// startTLSNxdnsWith is startTLSNxdns over the upstream up, whose
// certificate ca issued.
func startTLSNxdnsWith(t *testing.T, ca testCA, lan *testutil.Dnsmasq, up *upstreamNode) *tlsNode {
	t.Helper()
	return startTLSNode(t, ca, lan, up, "")
}

// startTLSNode is startTLSNxdnsWith with more TOML appended (clients).
func startTLSNode(t *testing.T, ca testCA, lan *testutil.Dnsmasq, up *upstreamNode, more string) *tlsNode {
	t.Helper()
	leaf, err := ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(90*24*time.Hour), "dns.home.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "fullchain.pem"), filepath.Join(dir, "key.pem")
	if err := certs.WriteLeafFiles(leaf, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	n := &tlsNode{ca: ca,
		dot: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)),
		doh: fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))}
	extra := fmt.Sprintf("[tls]\ncert_file = %q\nkey_file = %q\ndot_listen = [%q]\ndoh_listen = [%q]\n", certFile, keyFile, n.dot, n.doh)
	if lan != nil {
		extra += forwardZones("udp://"+lan.Addr.String(), "lan")
	}
	n.nxdnsProc = startNxdns(t, ca, settings{queryLog: true, extra: extra + more}, up)
	return n
}

func tool(t *testing.T, name, debianPackage string) string {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (Debian: apt-get install %s); CI installs it", name, debianPackage)
	}
	return bin
}

func run(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "SSL_CERT_FILE=/nonexistent", "CURL_CA_BUNDLE=") // trust only what the flags name
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRealClientsKdig: kdig +tls and +https get the pool's answer, verified
// against the CA and the name dns.home.test; the query log says dot and doh.
func TestRealClientsKdig(t *testing.T) {
	skipShort(t)
	kdig := tool(t, "kdig", "knot-dnsutils")
	n := startTLSNxdns(t, nil)
	for _, c := range []struct {
		proto, addr, flag, name string
	}{
		{"dot", n.dot, "+tls", "kdig-tls.example.org."},
		{"doh", n.doh, "+https", "kdig-https.example.org."},
	} {
		t.Run(c.proto, func(t *testing.T) {
			host, port, _ := net.SplitHostPort(c.addr)
			out, err := run(t, kdig, "@"+host, "-p", port, c.flag, "+tls-ca="+n.ca.file, "+tls-hostname=dns.home.test",
				"+timeout=5", "+retry=0", c.name, "A")
			want := fakeup.AddressV4(c.name).String()
			if err != nil || !strings.Contains(out, "NOERROR") || !strings.Contains(out, want) {
				t.Fatalf("kdig %s: %v, want NOERROR with %s\n%s", c.flag, err, want, out)
			}
			line := n.queryLog(t, c.name, 1)[0]
			if line["proto"] != c.proto {
				t.Errorf("query log proto %v, want %s", line["proto"], c.proto)
			}
			// The same client with a name the certificate lacks is refused.
			out, err = run(t, kdig, "@"+host, "-p", port, c.flag, "+tls-ca="+n.ca.file, "+tls-hostname=other.home.test",
				"+timeout=5", "+retry=0", c.name, "A")
			if err == nil && strings.Contains(out, want) {
				t.Fatalf("kdig accepted a certificate without the name other.home.test:\n%s", out)
			}
		})
	}
	fams := n.metrics(t)
	for _, proto := range []string{"dot", "doh"} {
		if got := metric(fams, "nxdns_queries_by_proto_total", "proto", proto); got < 1 {
			t.Errorf("nxdns_queries_by_proto_total{proto=%q} = %v, want at least 1", proto, got)
		}
	}
	if got := metric(fams, "nxdns_tls_cert_expiry_timestamp_seconds"); got < float64(time.Now().Add(89*24*time.Hour).Unix()) {
		t.Errorf("nxdns_tls_cert_expiry_timestamp_seconds = %v", got)
	}
}

// TestRealClientsCurlDoH: curl resolves web.lan through nxdns's DoH (the
// lan zone at dnsmasq gives 127.0.0.1) and fetches a page from it. curl's
// DoH lookups inherit --cacert (curl(1): the CA options apply to DoH; only
// the verification switches are separate, --doh-insecure, which this test
// never uses); without it the same command fails, so the certificate was
// verified.
func TestRealClientsCurlDoH(t *testing.T) {
	skipShort(t)
	curl := tool(t, "curl", "curl")
	lan := testutil.StartDnsmasq(t, "127.0.0.1 web.lan")
	n := startTLSNxdns(t, lan)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "resolved through nxdns") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	page := fmt.Sprintf("http://web.lan:%d/", port)
	doh := "https://" + n.doh + "/dns-query"

	out, err := run(t, curl, "-sS", "--max-time", "10", "--cacert", n.ca.file, "--doh-url", doh, page)
	if err != nil || out != "resolved through nxdns" {
		t.Fatalf("curl --doh-url: %v\n%s", err, out)
	}
	if lines := n.queryLog(t, "web.lan.", 1); lines[0]["proto"] != "doh" {
		t.Errorf("query log %v, want proto doh", lines[0])
	}
	out, err = run(t, curl, "-sS", "--max-time", "10", "--doh-url", doh, page)
	if err == nil {
		t.Fatalf("curl without the CA resolved through an unverified DoH server:\n%s", out)
	}
}

// TestRealBinaryCertificateRenewalBySIGHUP: new files and a SIGHUP (what
// the NixOS module's reloadServices does after an ACME renewal) make new
// DoT handshakes get the new certificate; the binary keeps running.
func TestRealBinaryCertificateRenewalBySIGHUP(t *testing.T) {
	skipShort(t)
	n := startTLSNxdns(t, nil)
	certFile := strings.Split(strings.Split(readFile(t, n.cfg), "cert_file = \"")[1], "\"")[0]
	keyFile := strings.Split(strings.Split(readFile(t, n.cfg), "key_file = \"")[1], "\"")[0]
	before := dotSerial(t, n)
	leaf, err := n.ca.IssueValid(time.Now().Add(-time.Hour), time.Now().Add(60*24*time.Hour), "dns.home.test", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteLeafFiles(leaf, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	hangUp(t, n.nxdnsProc)
	testutil.WaitFor(t, "a DoT handshake with the renewed certificate", 10*time.Second, func() bool {
		return dotSerial(t, n) == leaf.Leaf.SerialNumber.String()
	})
	if before == leaf.Leaf.SerialNumber.String() {
		t.Fatal("the renewed certificate has the old serial")
	}
}

func dotSerial(t *testing.T, n *tlsNode) string {
	t.Helper()
	c := &dns.Client{Net: "tcp-tls", Timeout: 5 * time.Second, TLSConfig: tlsClientConfig(n)}
	conn, err := c.Dial(n.dot)
	if err != nil {
		t.Fatalf("DoT dial: %v", err)
	}
	defer conn.Close()
	return peerSerial(conn)
}

func tlsClientConfig(n *tlsNode) *tls.Config {
	return &tls.Config{RootCAs: n.ca.Pool(), ServerName: "dns.home.test"}
}

func peerSerial(c *dns.Conn) string {
	return c.Conn.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
}
