package vmtests

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// Devices through the real binary (docs/devices.md): a trusted forwarder's
// client MAC and subnet name the device behind it, the same options from
// anyone else are ignored and counted; DoH and DoT clients name themselves
// with a ClientID, and a ClientID that is no name is refused.

// TestRealBinaryDevices_forwarderOptionsOnlyFromTrusted: kdig from
// 127.0.0.2 (listed in dns.trusted_forwarders) with dnsmasq's add-mac
// option 65001 and a /32 client subnet: the query log names the device
// behind it — its address, its MAC, its [[clients]] name by mac — and the
// forwarder it came through. The same query from 127.0.0.1 (not listed) is
// logged as 127.0.0.1 without a MAC, and both ignored options are counted.
func TestRealBinaryDevices_forwarderOptionsOnlyFromTrusted(t *testing.T) {
	skipShort(t)
	kdig := tool(t, "kdig", "knot-dnsutils")
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	n := startNxdns(t, ca, settings{queryLog: true,
		dns: "trusted_forwarders = [\"127.0.0.2\"]\n",
		extra: "[devices]\nneighbours = false\n" +
			"[[clients]]\nname = \"kids-tablet\"\nmac = \"02:00:5e:00:53:01\"\n"}, up)
	host, port, _ := net.SplitHostPort(n.dns)
	ask := func(source, name string) {
		t.Helper()
		out, err := run(t, kdig, "@"+host, "-p", port, "-b", source, "+ednsopt=65001:02005e005301",
			"+subnet=192.168.7.9/32", "+timeout=5", "+retry=0", name, "A")
		if want := fakeup.AddressV4(name).String(); err != nil || !strings.Contains(out, want) {
			t.Fatalf("kdig -b %s: %v, want an answer with %s\n%s", source, err, want, out)
		}
	}
	ask("127.0.0.2", "trusted.example.org.")
	line := n.queryLog(t, "trusted.example.org.", 1)[0]
	for k, want := range map[string]string{"client": "192.168.7.9", "client_mac": "02:00:5e:00:53:01",
		"client_name": "kids-tablet", "via": "127.0.0.2"} {
		if line[k] != want {
			t.Errorf("trusted forwarder: query log %s = %v, want %s (line %v)", k, line[k], want, line)
		}
	}
	ask("127.0.0.1", "forged.example.org.")
	line = n.queryLog(t, "forged.example.org.", 1)[0]
	if line["client"] != "127.0.0.1" || line["client_mac"] != nil || line["client_name"] == "kids-tablet" || line["via"] != nil {
		t.Errorf("untrusted source: query log %v, want client 127.0.0.1 with no MAC, name or via", line)
	}
	fams := n.metrics(t)
	for _, opt := range []string{"mac", "subnet"} {
		if got := metric(fams, "nxdns_client_options_ignored_total", "option", opt, "reason", "untrusted"); got != 1 {
			t.Errorf("nxdns_client_options_ignored_total{option=%q,reason=\"untrusted\"} = %v, want 1", opt, got)
		}
	}
	if got := metric(fams, "nxdns_device_queries_total", "device", "kids-tablet"); got != 1 {
		t.Errorf("nxdns_device_queries_total{device=\"kids-tablet\"} = %v, want 1", got)
	}
}

// TestRealBinaryDevices_clientIDOverDoHAndDoT: kdig +https with the path
// /dns-query/kids-tablet and kdig +tls with the SNI
// kids-tablet.dns.home.test (the certificate's name dns.home.test, checked
// against the CA) are both the device the [[clients]] entry names by
// client_id. A path ClientID with markup or 10 kB of text is refused with
// 400 and a reason, an SNI one that is no DNS label by closing the
// connection; each is counted.
func TestRealBinaryDevices_clientIDOverDoHAndDoT(t *testing.T) {
	skipShort(t)
	kdig := tool(t, "kdig", "knot-dnsutils")
	ca := newTestCA(t)
	n := startTLSNode(t, ca, nil, startUpstream(t, ca, "dot://127.0.0.1:0"),
		"[devices]\nneighbours = false\n[[clients]]\nname = \"Tablet\"\nclient_id = \"kids-tablet\"\n")
	for _, c := range []struct {
		proto, addr, name string
		flags             []string
	}{
		{"doh", n.doh, "doh-id.example.org.", []string{"+https=/dns-query/kids-tablet"}},
		{"dot", n.dot, "dot-id.example.org.", []string{"+tls", "+tls-sni=kids-tablet.dns.home.test"}},
	} {
		host, port, _ := net.SplitHostPort(c.addr)
		args := append([]string{"@" + host, "-p", port}, c.flags...)
		args = append(args, "+tls-ca="+n.ca.file, "+tls-hostname=dns.home.test", "+timeout=5", "+retry=0", c.name, "A")
		out, err := run(t, kdig, args...)
		if want := fakeup.AddressV4(c.name).String(); err != nil || !strings.Contains(out, want) {
			t.Fatalf("kdig %s: %v, want an answer with %s\n%s", c.proto, err, want, out)
		}
		line := n.queryLog(t, c.name, 1)[0]
		if line["proto"] != c.proto || line["client_id"] != "kids-tablet" || line["client_name"] != "Tablet" {
			t.Errorf("%s: query log %v, want client_id kids-tablet, client_name Tablet", c.proto, line)
		}
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsClientConfig(n)}}
	for _, bad := range []string{"%3Cscript%3Ealert(1)%3C%2Fscript%3E", strings.Repeat("a", 10<<10), "kids/tablet"} {
		resp, err := client.Get(fmt.Sprintf("https://%s/dns-query/%s?dns=AAABAAABAAAAAAAAB2V4YW1wbGUDb3JnAAABAAE", n.doh, bad))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid ClientID") {
			t.Errorf("ClientID %.20q: %d %q, want 400 invalid ClientID", bad, resp.StatusCode, body)
		}
	}
	// A DoT SNI whose first label is no ClientID: the connection is closed
	// after the handshake, before any answer.
	host, port, _ := net.SplitHostPort(n.dot)
	if out, err := run(t, kdig, "@"+host, "-p", port, "+tls", "+tls-sni=bad_label.dns.home.test", "+tls-ca="+n.ca.file,
		"+tls-hostname=dns.home.test", "+timeout=3", "+retry=0", "refused-id.example.org.", "A"); err == nil && strings.Contains(out, "NOERROR") {
		t.Errorf("an invalid SNI ClientID was answered:\n%s", out)
	}
	if got := metric(n.metrics(t), "nxdns_client_options_ignored_total", "option", "client_id", "reason", "invalid"); got != 4 {
		t.Errorf("nxdns_client_options_ignored_total{option=\"client_id\"} = %v, want 4 (three paths, one SNI)", got)
	}
}

// TestRealBinaryDevices_newDeviceQuarantinedUntilAcknowledged: a device
// seen for the first time (its MAC from a trusted forwarder) is filtered by
// devices.new_devices' group, logged once as new and counted; once
// acknowledged through the API it is filtered like every other client, and
// the acknowledgement is kept in filter.state_dir.
func TestRealBinaryDevices_newDeviceQuarantinedUntilAcknowledged(t *testing.T) {
	skipShort(t)
	tool(t, "kdig", "knot-dnsutils")
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	state := t.TempDir()
	list := filepath.Join(t.TempDir(), "strangers.txt")
	if err := os.WriteFile(list, []byte("||video.example^\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startNxdns(t, ca, settings{queryLog: true,
		dns: "trusted_forwarders = [\"127.0.0.2\"]\n",
		extra: fmt.Sprintf(`[devices]
neighbours = false
new_devices = "quarantine"
[filter]
state_dir = %q
[[filter.lists]]
name = "strangers"
path = %q
[[filter.groups]]
name = "default"
[[filter.groups]]
name = "quarantine"
lists = ["strangers"]
`, state, list)}, up)
	const mac = "02:00:5e:00:53:99"
	ask := func() string {
		return p.kdig(t, "127.0.0.2", "video.example", "A", "+ednsopt=65001:02005e005399")
	}
	if out := ask(); !strings.Contains(out, "0.0.0.0") {
		t.Fatalf("a new device's query for a name its quarantine group blocks:\n%s", out)
	}
	line := p.queryLog(t, "video.example.", 1)[0]
	if line["new_device"] != true || line["client_mac"] != mac || line["group"] != "quarantine" {
		t.Errorf("query log %v, want new_device, the MAC and group quarantine", line)
	}
	ask()
	if n := p.logs.count("new device", "mac:"+mac); n != 1 {
		t.Errorf("%d \"new device\" lines for %s, want 1", n, mac)
	}
	if got := metric(p.metrics(t), "nxdns_devices_new"); got != 1 {
		t.Errorf("nxdns_devices_new = %v, want 1", got)
	}
	p.post(t, "/api/devices/ack?client=mac:"+mac)
	if out := ask(); strings.Contains(out, "0.0.0.0") || !strings.Contains(out, fakeup.AddressV4("video.example.").String()) {
		t.Errorf("an acknowledged device is still quarantined:\n%s", out)
	}
	fams := p.metrics(t)
	if metric(fams, "nxdns_devices_new") != 0 || metric(fams, "nxdns_devices_first_seen_total") != 1 {
		t.Errorf("after ack: nxdns_devices_new %v (want 0), first_seen_total %v (want 1)",
			metric(fams, "nxdns_devices_new"), metric(fams, "nxdns_devices_first_seen_total"))
	}
	testutil.WaitFor(t, "the acknowledgement written to the state directory", 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(state, "dashboard-devices.txt"))
		return strings.Contains(string(b), "mac:"+mac+" ") && strings.Contains(string(b), " 1\n")
	})
}

// TestRealBinaryDevices_neighbourTableNamesTheDevice: nxdns runs in the
// "router" namespace of a veth LAN and a kdig in the "phone" namespace asks
// it over IPv4 and IPv6: both queries are logged with the phone's real MAC
// (learned by ARP and NDP from the kernel's neighbour table) and the name
// [[clients]] gives that MAC — one device at two addresses.
func TestRealBinaryDevices_neighbourTableNamesTheDevice(t *testing.T) {
	skipShort(t)
	kdig := tool(t, "kdig", "knot-dnsutils")
	lan := testutil.NewVethLAN(t)
	cfg := filepath.Join(t.TempDir(), "nxdns.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`[dns]
listen = ["%s:53", "[%s]:53"]
allow = ["10.99.0.0/24", "fd00:99::/64"]
[web]
listen = ""
[log]
queries = true
[local]
records = ["nas.home.arpa. A 10.99.0.50"]
[[clients]]
name = "phone"
mac = %q
[[upstreams]]
url = "tls://127.0.0.1:853"
tls_name = "upstream.test"
`, lan.Router4, lan.Router6, lan.PhoneMAC)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", lan.Router, nxdnsBinary, "run", "--config", cfg)
	p := &nxdnsProc{cmd: cmd, logs: &logLines{}}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go p.logs.drain(stderr)
	testutil.WaitFor(t, "nxdns serving in the router namespace", 15*time.Second, func() bool { return p.logs.count("serving") > 0 })
	for _, server := range []netip.Addr{lan.Router4, lan.Router6} {
		// The first queries may arrive before the neighbour notification
		// for the phone has been read: ask until one is logged with the MAC.
		testutil.WaitFor(t, "a query from the phone over "+server.String()+" logged with its MAC", 10*time.Second, func() bool {
			out, err := exec.Command("ip", "netns", "exec", lan.Phone, kdig, "@"+server.String(), "+timeout=2", "+retry=0", "nas.home.arpa", "A").CombinedOutput()
			if err != nil || !strings.Contains(string(out), "10.99.0.50") {
				t.Fatalf("kdig from the phone to %s: %v\n%s", server, err, out)
			}
			for _, l := range p.logs.matching("server.query", `"client_mac": "`+lan.PhoneMAC+`"`) {
				if strings.Contains(l, `"client": "`+phoneAddr(lan, server)+`"`) {
					return true
				}
			}
			return false
		})
	}
	for _, line := range p.queryLog(t, "nas.home.arpa.", 2) {
		if line["client_mac"] == lan.PhoneMAC && line["client_name"] != "phone" {
			t.Errorf("query log %v: the MAC's [[clients]] name is phone", line)
		}
	}
}

// phoneAddr is the phone's address in server's family.
func phoneAddr(lan *testutil.VethLAN, server netip.Addr) string {
	if server.Is4() {
		return lan.Phone4.String()
	}
	return lan.Phone6.String()
}
