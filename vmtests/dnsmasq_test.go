package vmtests

import (
	"net"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/testutil"
)

// dnsmasqForwarder is the router's dnsmasq configuration docs/devices.md
// "Setting it up" gives for a trusted forwarder, without the server line.
var dnsmasqForwarder = []string{"--add-mac", "--add-subnet=32,128", "--strip-mac", "--strip-subnet"}

// TestRealDnsmasqForwarder_clientsOwnMACIsNotPassedOn: a real dnsmasq,
// configured as docs/devices.md says and listed in dns.trusted_forwarders,
// forwards a LAN client's query that carries a made-up option 65001 of its
// own (another device's MAC): nxdns must not name the device by it. dnsmasq
// with add-mac alone passes a client's option on untouched when it finds
// no MAC for the client (here: a loopback client has none), so without
// strip-mac any client behind the router could take another device's
// settings.
func TestRealDnsmasqForwarder_clientsOwnMACIsNotPassedOn(t *testing.T) {
	skipShort(t)
	kdig := tool(t, "kdig", "knot-dnsutils")
	dnsmasq := tool(t, "dnsmasq", "dnsmasq-base")
	ca := newTestCA(t)
	n := startNxdns(t, ca, settings{queryLog: true,
		dns: "trusted_forwarders = [\"127.0.0.1\"]\n",
		extra: "[devices]\nneighbours = false\n" +
			"[[clients]]\nname = \"dad-laptop\"\nmac = \"02:00:5e:00:53:01\"\n"}, startUpstream(t, ca, "dot://127.0.0.1:0"))
	host, port, _ := net.SplitHostPort(n.dns)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dmPort := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
	pc.Close()
	args := append([]string{"--no-daemon", "--conf-file=/dev/null", "--port=" + dmPort, "--listen-address=127.0.0.1",
		"--bind-interfaces", "--no-resolv", "--no-hosts", "--cache-size=0", "--server=" + host + "#" + port,
		"--pid-file=" + t.TempDir() + "/dnsmasq.pid"}, dnsmasqForwarder...)
	if u, err := user.Current(); err == nil {
		args = append(args, "--user="+u.Username) // as root, dnsmasq would switch to nobody
	}
	cmd := exec.Command(dnsmasq, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := &dns.Client{Timeout: time.Second}
	testutil.WaitFor(t, "dnsmasq answering", 10*time.Second, func() bool {
		_, _, err := c.Exchange(new(dns.Msg).SetQuestion("ready.example.org.", dns.TypeA), "127.0.0.1:"+dmPort)
		return err == nil
	})
	out, err := run(t, kdig, "@127.0.0.1", "-p", dmPort, "+ednsopt=65001:02005e005301", "+timeout=5", "+retry=0", "forged.example.org.", "A")
	if err != nil || !strings.Contains(out, "NOERROR") {
		t.Fatalf("kdig through dnsmasq: %v\n%s", err, out)
	}
	line := n.queryLog(t, "forged.example.org.", 1)[0]
	if line["client_mac"] == "02:00:5e:00:53:01" || line["client_name"] == "dad-laptop" {
		t.Errorf("a client's own option 65001 came through the trusted dnsmasq and was believed: %v", line)
	}
}
