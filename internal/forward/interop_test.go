package forward

import (
	"bufio"
	"fmt"
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
)

// startDnsmasq runs Debian's dnsmasq (package dnsmasq-base) on a free
// loopback port as the LAN resolver: DNS only, no DHCP, no upstreams, no
// system files; host.lan and its PTR come from a hosts file of the test's.
// It returns once dnsmasq logs "started", which it does after binding.
func startDnsmasq(t *testing.T) netip.AddrPort {
	t.Helper()
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		t.Skip("dnsmasq not installed (Debian: apt-get install dnsmasq-base); CI installs it")
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("192.168.1.50 host.lan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 5 { // a free port can be taken between probing and dnsmasq's bind
		port := freeLoopbackPort(t)
		if addr, ok := tryDnsmasq(t, bin, hosts, port); ok {
			return addr
		}
	}
	t.Fatal("dnsmasq did not start on any of 5 free ports")
	return netip.AddrPort{}
}

func tryDnsmasq(t *testing.T, bin, hosts string, port uint16) (netip.AddrPort, bool) {
	args := []string{
		"--keep-in-foreground", "--conf-file=/dev/null", "--log-facility=-",
		"--no-resolv", "--no-hosts", "--addn-hosts=" + hosts, "--local-ttl=300",
		fmt.Sprintf("--port=%d", port), "--listen-address=127.0.0.1", "--bind-interfaces",
		"--pid-file=", // empty: no PID file
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root", "--group=root") // dnsmasq would drop to nobody
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan bool, 1)
	var log strings.Builder
	var wg sync.WaitGroup
	wg.Go(func() { // reads until dnsmasq exits and closes its stderr
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "started, version") {
				started <- true
				signalled = true
			}
		}
		if !signalled {
			started <- false
		}
	})
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		wg.Wait()
		cmd.Wait()
	}
	select {
	case ok := <-started:
		if !ok {
			stop()
			t.Logf("dnsmasq on port %d exited:\n%s", port, log.String())
			return netip.AddrPort{}, false
		}
	case <-time.After(10 * time.Second):
		stop()
		t.Fatalf("dnsmasq did not start within 10s:\n%s", log.String())
	}
	t.Cleanup(stop)
	return netip.AddrPortFrom(loopback, port), true
}

// freeLoopbackPort is a port free for both UDP and TCP at this instant.
func freeLoopbackPort(t *testing.T) uint16 {
	conn, ln := listenPair(t)
	port := netip.MustParseAddrPort(ln.Addr().String()).Port()
	conn.Close()
	ln.Close()
	return port
}

func TestInterop_Dnsmasq(t *testing.T) {
	addr := startDnsmasq(t)
	for _, scheme := range []string{"udp", "tcp"} {
		t.Run(scheme, func(t *testing.T) {
			tab := newTestTable(t, 3*time.Second,
				"lan", scheme+"://"+addr.String(),
				"168.192.in-addr.arpa", scheme+"://"+addr.String())

			z, ok := tab.Match("host.lan.")
			if !ok {
				t.Fatal("no zone for host.lan.")
			}
			resp, up, err := z.Resolve(t.Context(), query("host.lan."))
			if err != nil {
				t.Fatalf("A host.lan: %v", err)
			}
			if got := firstA(resp); got != "192.168.1.50" || resp.Rcode != dns.RcodeSuccess {
				t.Errorf("A host.lan = %q (%s), want 192.168.1.50", got, dns.RcodeToString[resp.Rcode])
			}
			if up != scheme+"://"+addr.String() {
				t.Errorf("upstream %q, want %s://%s", up, scheme, addr)
			}

			z, ok = tab.Match(ptr50)
			if !ok || z.Name() != "168.192.in-addr.arpa." {
				t.Fatalf("no reverse zone for %s", ptr50)
			}
			resp, _, err = z.Resolve(t.Context(), new(dns.Msg).SetQuestion(ptr50, dns.TypePTR))
			if err != nil {
				t.Fatalf("PTR: %v", err)
			}
			if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "host.lan." {
				t.Errorf("PTR answer %v, want host.lan.", resp.Answer)
			}

			// The same through Names, as the query log would learn it.
			n := NewNames(nil, tab, NamesOptions{})
			stored := make(chan storedName, 1)
			n.stored = func(ip netip.Addr, name string) { stored <- storedName{ip, name} }
			defer n.Close()
			n.Name(client50)
			if s := waitStored(t, stored); s.name != "host.lan" {
				t.Errorf("learned %q, want host.lan", s.name)
			}
		})
	}
}
