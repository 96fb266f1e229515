package testutil

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/certs"
)

// unboundDoHPath is where unbound answers DoH (its http-endpoint).
const unboundDoHPath = "/dns-query"

// Unbound is a running NLnet Labs unbound serving DNS over TLS and, when it
// is built with nghttp2, DNS over HTTPS on 127.0.0.1.
type Unbound struct {
	Name    string         // the name on its certificate, issued by the test's CA
	DoTAddr netip.AddrPort // 127.0.0.1:port
	DoTURL  string         // tls://Name:port, as an nxdns upstream url
	DoHAddr netip.AddrPort // zero without DoH
	DoHURL  string         // https://Name:port/dns-query; "" when unbound has no DoH
}

// UnboundOptions says what unbound serves; it answers every other name
// NXDOMAIN itself.
type UnboundOptions struct {
	// Name goes on the server certificate; "unbound.test" when empty.
	Name string
	// LocalZone is a zone unbound answers itself (type static: a name
	// without local data is NXDOMAIN), e.g. "nxdns.test.".
	LocalZone string
	// LocalData are unbound local-data records in the zone, e.g.
	// "host.nxdns.test. A 192.0.2.10".
	LocalData []string
}

// unboundConf answers every name itself and never recurses: local-zone "."
// static keeps the iterator from ever leaving the machine and answers what
// LocalData does not hold with NXDOMAIN — the root too, so nxdns's start-up
// probe (". NS") sees a serving resolver, where "." refuse would have put
// the upstream in backoff at start.
const unboundConf = UnboundServerBase + `	interface: 127.0.0.1@{{dot}}
	interface: 127.0.0.1@{{doh}}
	tls-port: {{dot}}
	https-port: {{doh}}
	http-endpoint: "{{path}}"
	tls-service-key: "{{dir}}/key.pem"
	tls-service-pem: "{{dir}}/cert.pem"
	access-control: 127.0.0.0/8 allow
	module-config: "iterator"
	local-zone: "." static
{{local}}remote-control:
	control-enable: no
`

// UnboundServerBase opens the server clause of every test unbound's
// configuration: in the foreground, logging to stderr, one thread, IPv4
// only, in {{dir}}, no interface but those the rest names.
const UnboundServerBase = `server:
	verbosity: 1
	use-syslog: no
	logfile: ""
	do-daemonize: no
	chroot: ""
	username: ""
	directory: "{{dir}}"
	pidfile: ""
	num-threads: 1
	do-ip6: no
	interface-automatic: no
`

// StartUnbound runs unbound (Debian package unbound) until the test ends and
// returns once it serves. It skips the test when unbound is not installed.
// Without nghttp2 in `unbound -V` DoH is not served and DoHURL is empty; a
// test that needs DoH checks it.
func StartUnbound(t testing.TB, ca *certs.CA, opts UnboundOptions) *Unbound {
	t.Helper()
	bin := lookProgram(t, "unbound", "unbound")
	if opts.Name == "" {
		opts.Name = "unbound.test"
	}
	version, _ := exec.Command(bin, "-V").CombinedOutput()
	withDoH := bytes.Contains(version, []byte("nghttp2"))
	dir := t.TempDir()
	writeServerTLS(t, ca, dir, opts.Name)
	for range portAttempts {
		u := &Unbound{Name: opts.Name, DoTAddr: loopbackPort(FreePort(t))}
		u.DoTURL = fmt.Sprintf("tls://%s:%d", u.Name, u.DoTAddr.Port())
		doh := FreePort(t) // configured either way; unbound without nghttp2 serves nothing on it
		if withDoH {
			u.DoHAddr = loopbackPort(doh)
			u.DoHURL = fmt.Sprintf("https://%s:%d%s", u.Name, doh, unboundDoHPath)
		}
		conf := writeUnboundConf(t, dir, opts, u.DoTAddr.Port(), doh)
		// "start of service" follows the opening of every port (daemon.c).
		if startProgram(t, "unbound", bin, []string{"-d", "-c", conf}, "start of service") != nil {
			return u
		}
	}
	t.Fatalf("unbound did not start on any of %d pairs of free ports", portAttempts)
	return nil
}

// writeUnboundConf writes the configuration and checks it with
// unbound-checkconf when that is installed, for a clear message on a typo.
func writeUnboundConf(t testing.TB, dir string, opts UnboundOptions, dot, doh uint16) string {
	t.Helper()
	var local strings.Builder
	if opts.LocalZone != "" {
		fmt.Fprintf(&local, "\tlocal-zone: %q static\n", opts.LocalZone)
	}
	for _, rr := range opts.LocalData {
		fmt.Fprintf(&local, "\tlocal-data: %q\n", rr)
	}
	conf := strings.NewReplacer("{{dir}}", dir, "{{dot}}", fmt.Sprint(dot), "{{doh}}", fmt.Sprint(doh),
		"{{path}}", unboundDoHPath, "{{local}}", local.String()).Replace(unboundConf)
	file := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if check, err := exec.LookPath("unbound-checkconf"); err == nil {
		if out, err := exec.Command(check, file).CombinedOutput(); err != nil {
			t.Fatalf("unbound-checkconf: %v\n%s\n%s", err, out, conf)
		}
	}
	return file
}

// writeServerTLS writes a certificate chain for name and its key as PEM
// files cert.pem and key.pem in dir, the way OpenSSL-based servers read them.
func writeServerTLS(t testing.TB, ca *certs.CA, dir, name string) {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatalf("issue %s: %v", name, err)
	}
	var chain bytes.Buffer
	for _, der := range cert.Certificate {
		pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), chain.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func loopbackPort(port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
}
