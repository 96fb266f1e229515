package upstream

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/testutil"
)

// unboundConf serves one local name over DoT and DoH on loopback and answers
// nothing else: "." refuse keeps the iterator from ever leaving the machine.
const unboundConf = `server:
	verbosity: 1
	use-syslog: no
	logfile: ""
	do-daemonize: no
	chroot: ""
	username: ""
	directory: "{{dir}}"
	pidfile: "{{dir}}/unbound.pid"
	num-threads: 1
	do-ip6: no
	interface-automatic: no
	interface: 127.0.0.1@{{dot}}
	interface: 127.0.0.1@{{doh}}
	tls-port: {{dot}}
	https-port: {{doh}}
	http-endpoint: "/dns-query"
	tls-service-key: "{{dir}}/key.pem"
	tls-service-pem: "{{dir}}/cert.pem"
	access-control: 127.0.0.0/8 allow
	module-config: "iterator"
	local-zone: "." refuse
	local-zone: "nxdns.test." static
	local-data: "host.nxdns.test. A 192.0.2.10"
remote-control:
	control-enable: no
`

// TestUnboundInterop resolves through a real unbound over DoT (and DoH when
// unbound is built with nghttp2): interoperability with a server we did not
// write, including pipelining and the question's case.
func TestUnboundInterop(t *testing.T) {
	bin, err := exec.LookPath("unbound")
	if err != nil {
		t.Skip("unbound is not installed (apt-get install unbound); CI installs it")
	}
	version, _ := exec.Command(bin, "-V").CombinedOutput()
	withDoH := bytes.Contains(version, []byte("nghttp2"))

	ca := testutil.NewCA(t)
	dir := t.TempDir()
	dotPort, dohPort := unboundFreePort(t), unboundFreePort(t)
	unboundWriteTLS(t, ca, dir, "unbound.test")
	conf := strings.NewReplacer("{{dir}}", dir, "{{dot}}", fmt.Sprint(dotPort), "{{doh}}", fmt.Sprint(dohPort)).Replace(unboundConf)
	confFile := filepath.Join(dir, "unbound.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	unboundStart(t, bin, confFile, dotPort, dohPort, withDoH)

	loopback := netip.MustParseAddr("127.0.0.1")
	clients := map[string]Client{
		"DoT": NewDoT(transportEndpoint(t, fmt.Sprintf("tls://unbound.test:%d", dotPort), netip.AddrPortFrom(loopback, dotPort)), ca.Pool(), nil),
	}
	if withDoH {
		clients["DoH"] = NewDoH(transportEndpoint(t, fmt.Sprintf("https://unbound.test:%d/dns-query", dohPort), netip.AddrPortFrom(loopback, dohPort)), ca.Pool(), nil)
	} else {
		t.Log("unbound is built without nghttp2: DoH interop not tested")
	}
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			defer c.Close()
			unboundResolve(t, c, "host.nxdns.test.")
			unboundResolve(t, c, "HoSt.NxDnS.tEsT.") // validation compares names case-insensitively
			var wg sync.WaitGroup
			for range 10 { // pipelined on DoT, multiplexed on DoH
				wg.Go(func() { unboundResolve(t, c, "host.nxdns.test.") })
			}
			wg.Wait()
		})
	}
}

func unboundResolve(t *testing.T, c Client, name string) {
	t.Helper()
	q := transportQuery(name)
	r, err := c.Exchange(transportCtx(t), q)
	if err != nil {
		t.Errorf("resolve %s: %v", name, err)
		return
	}
	if r.Id != q.Id || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("resolve %s: id %d (want %d), rcode %s, answer %v", name, r.Id, q.Id, dns.RcodeToString[r.Rcode], r.Answer)
		return
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != "192.0.2.10" {
		t.Errorf("resolve %s: answer %v, want A 192.0.2.10", name, r.Answer[0])
	}
}

// unboundFreePort asks the kernel for a free loopback port. Another process
// could take it before unbound binds; unboundStart then fails clearly.
func unboundFreePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).AddrPort().Port()
}

// unboundWriteTLS writes the server certificate chain and key as unbound
// (OpenSSL) reads them.
func unboundWriteTLS(t *testing.T, ca *certs.CA, dir, name string) {
	t.Helper()
	cert, err := ca.Issue(name)
	if err != nil {
		t.Fatal(err)
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

// unboundStart runs unbound in the foreground until the test ends and waits
// until its TLS ports accept connections (bounded: 10 s).
func unboundStart(t *testing.T, bin, confFile string, dotPort, dohPort uint16, withDoH bool) {
	t.Helper()
	if check, err := exec.LookPath("unbound-checkconf"); err == nil { // a clear message for a bad config
		if out, err := exec.Command(check, confFile).CombinedOutput(); err != nil {
			t.Fatalf("unbound-checkconf: %v\n%s", err, out)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "-d", "-c", confFile)
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start unbound: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("unbound output:\n%s", stderr.String())
		}
	})
	ports := []uint16{dotPort}
	if withDoH {
		ports = append(ports, dohPort)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range ports {
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("unbound exited before listening on %s: %v", addr, err)
			case <-time.After(20 * time.Millisecond): // polling a port: there is no readiness signal
			}
			if time.Now().After(deadline) {
				t.Fatalf("unbound not listening on %s after 10 s", addr)
			}
		}
	}
}
