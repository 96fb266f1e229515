package testutil

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dnsmasq is a running dnsmasq on 127.0.0.1 playing a home router's DNS:
// DNS only (no DHCP), no upstream servers, no system files; it answers the
// names of a hosts file the test gives and their PTR records.
type Dnsmasq struct {
	Addr netip.AddrPort // 127.0.0.1:port, UDP and TCP

	proc *program
}

// StartDnsmasq runs dnsmasq (Debian package dnsmasq-base) until the test
// ends and returns once it serves. It skips the test when dnsmasq is not
// installed. Each of hosts is a hosts-file line, an address then names:
// "192.168.1.50 host.lan" answers A host.lan and, the first name being the
// canonical one, PTR 50.1.168.192.in-addr.arpa. An address with no line
// has no PTR record.
func StartDnsmasq(t testing.TB, hosts ...string) *Dnsmasq {
	t.Helper()
	bin := lookProgram(t, "dnsmasq", "dnsmasq-base")
	file := writeHosts(t, hosts)
	for range portAttempts {
		port := FreePort(t)
		// dnsmasq logs "started" after binding its sockets.
		if p := startProgram(t, "dnsmasq", bin, dnsmasqArgs(file, port), "started, version"); p != nil {
			return &Dnsmasq{Addr: loopbackPort(port), proc: p}
		}
	}
	t.Fatalf("dnsmasq did not start on any of %d free ports", portAttempts)
	return nil
}

func dnsmasqArgs(hosts string, port uint16) []string {
	args := []string{
		"--keep-in-foreground", "--conf-file=/dev/null", "--log-facility=-", "--log-queries",
		"--no-resolv", "--no-hosts", "--addn-hosts=" + hosts, "--local-ttl=300",
		fmt.Sprintf("--port=%d", port), "--listen-address=127.0.0.1", "--bind-interfaces",
		"--pid-file=", // empty: no PID file
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root", "--group=root") // it would drop to nobody
	}
	return args
}

// writeHosts writes the hosts file, refusing a line whose address does not
// parse: dnsmasq would skip it with a warning and the test would fail later
// for a reason far from its cause.
func writeHosts(t testing.TB, hosts []string) string {
	t.Helper()
	for _, line := range hosts {
		f := strings.Fields(line)
		if len(f) < 2 {
			t.Fatalf("hosts line %q: want an address and at least one name", line)
		}
		if _, err := netip.ParseAddr(f[0]); err != nil {
			t.Fatalf("hosts line %q: %v", line, err)
		}
	}
	file := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(file, []byte(strings.Join(hosts, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Asked is how many queries of type qtype ("A", "PTR") for name dnsmasq has
// logged so far, from any client. Its log trails its answers by a moment.
func (d *Dnsmasq) Asked(qtype, name string) int {
	return d.proc.count(fmt.Sprintf("query[%s] %s from ", qtype, strings.TrimSuffix(name, ".")))
}
