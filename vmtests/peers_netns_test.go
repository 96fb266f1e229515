package vmtests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/nxdns/nxdns/internal/testutil"
)

// nsPeer is an nxdns running in a network namespace of its own, one end
// of the veth link to the other, and the test's way in: an HTTP client
// whose connections are dialled inside the namespace (to its loopback), a
// control token of the test's own.
type nsPeer struct {
	*nxdnsProc
	ns, token string
	client    *http.Client
}

// nsWebPort is where each peer's web.listen is, in its own namespace.
const nsWebPort = 8080

func newNSPeer(p *nxdnsProc, ns, token string) *nsPeer {
	tr := &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := testutil.RunInNetns(ns, func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
	return &nsPeer{nxdnsProc: p, ns: ns, token: token, client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// call sends method path with the test's token and decodes a 200's JSON
// answer into out (nil: none); another status fails the test.
func (n *nsPeer) call(t *testing.T, method, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest(method, fmt.Sprintf("http://127.0.0.1:%d%s", nsWebPort, path), nil)
	req.Header.Set("Authorization", "Bearer "+n.token)
	resp, err := n.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s in %s: %v", method, path, n.ns, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s in %s: %s %s", method, path, n.ns, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// replicated is the replicated state: its digest and each key's value and
// stamp's wall time.
func (n *nsPeer) replicated(t *testing.T) (string, map[string]string, map[string]int64) {
	t.Helper()
	var st struct {
		Digest  string
		Entries []struct {
			Key, Value string
			Stamp      struct{ Wall int64 }
		}
	}
	n.call(t, "GET", "/api/peers/state", &st)
	values, walls := map[string]string{}, map[string]int64{}
	for _, e := range st.Entries {
		values[e.Key], walls[e.Key] = e.Value, e.Stamp.Wall
	}
	return st.Digest, values, walls
}

// askAs asks the peer's own DNS listener from inside its namespace, as a
// trusted forwarder passing on a device's MAC (EDNS option 65001).
func (n *nsPeer) askAs(t *testing.T, mac string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(n.dns)
	out, err := exec.Command("ip", "netns", "exec", n.ns, "kdig", "-b", host, "-p", port, "@"+host, "+timeout=3", "+retry=0",
		"+ednsopt=65001:"+strings.ReplaceAll(mac, ":", ""), "nas.home.arpa", "A").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "10.99.0.50") {
		t.Fatalf("kdig in %s as %s: %v\n%s", n.ns, mac, err, out)
	}
}

// view is what the test compares of a peer's dashboard state.
type view struct {
	Allowed  []string
	Switches map[string]bool // kids' services switched from the dashboard
	NTAs     []string
	Acked    []string // devices not new
	Paused   bool     // 192.168.1.30's pause
}

func (n *nsPeer) view(t *testing.T) view {
	t.Helper()
	var v view
	var allowed struct{ Names []string }
	n.call(t, "GET", "/api/filter/allow", &allowed)
	v.Allowed = allowed.Names
	var groups []struct {
		Name      string
		Overrides struct{ Services map[string]bool }
	}
	n.call(t, "GET", "/api/filter/groups", &groups)
	for _, g := range groups {
		if g.Name == "kids" {
			v.Switches = g.Overrides.Services
		}
	}
	var ntas []struct{ Name string }
	n.call(t, "GET", "/api/dnssec/nta", &ntas)
	for _, x := range ntas {
		v.NTAs = append(v.NTAs, x.Name)
	}
	var devs struct {
		Devices []struct {
			Key string
			New bool
		}
	}
	n.call(t, "GET", "/api/devices", &devs)
	for _, d := range devs.Devices {
		if !d.New {
			v.Acked = append(v.Acked, d.Key)
		}
	}
	slices.Sort(v.Acked)
	var check struct{ Paused bool }
	n.call(t, "GET", "/api/filter/check?name=games.example&client=192.168.1.30", &check)
	v.Paused = check.Paused
	return v
}

func (v view) equal(o view) bool {
	return slices.Equal(v.Allowed, o.Allowed) && maps.Equal(v.Switches, o.Switches) && slices.Equal(v.NTAs, o.NTAs) &&
		slices.Equal(v.Acked, o.Acked) && v.Paused == o.Paused
}

// Two nxdns binaries in two network namespaces joined by a veth pair, each
// the other's [[peers]] (docs/how-to/two-pis.md). The link is taken down
// (ip link set down) while both take conflicting actions on every kind of
// replicated state — allowed names, a client's pause, the kids' service
// switches, dashboard NTAs, device acknowledgements — and brought up
// again: both end in the same state (the same replicated digest), each
// conflict won by the later action whichever side made it, and no action
// of either side lost.
func TestPeers_twoNamespacesCutByLinkDownConverge(t *testing.T) {
	skipShort(t)
	tool(t, "kdig", "knot-dnsutils")
	if os.Geteuid() == 0 {
		if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
			t.Skipf("ip netns is unavailable here: %v %s", err, out)
		}
	}
	lan := testutil.NewVethLAN(t) // skips when not root or without ip(8)
	testutil.IP(t, "-n", lan.Phone, "link", "set", "lo", "up")
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0") // unreachable from the namespaces: DNS here is [local] only

	type side struct {
		ns, addr, dir string
	}
	sides := []side{{lan.Router, lan.Router4.String(), t.TempDir()}, {lan.Phone, lan.Phone4.String(), t.TempDir()}}
	token := func(dir, name, scope string) string {
		out, err := exec.Command(nxdnsBinary, "token", "add", name, "--scope", scope, "--state-dir", dir).Output()
		if err != nil {
			t.Fatalf("token add: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	// A web.listen the LAN reaches needs a login for browsers; the test
	// and the peers use tokens.
	hash, err := bcrypt.GenerateFromPassword([]byte("not used by the test"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	passwordFile := filepath.Join(t.TempDir(), "web.hash")
	if err := os.WriteFile(passwordFile, hash, 0o600); err != nil {
		t.Fatal(err)
	}
	var peers []*nsPeer
	for i, s := range sides {
		other := sides[1-i]
		peerToken := filepath.Join(t.TempDir(), "peer.token") // the other's read token, held here
		if err := os.WriteFile(peerToken, []byte(token(other.dir, "peer", "read")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		mine := token(s.dir, "test", "control")
		p := startNxdns(t, ca, settings{netns: s.ns, web: fmt.Sprintf("0.0.0.0:%d", nsWebPort),
			webKeys: fmt.Sprintf("password_file = %q\ntokens_over_http = true\n", passwordFile), dns: "trusted_forwarders = [\"127.0.0.1\"]\n",
			extra: fmt.Sprintf(`[devices]
neighbours = false
[local]
records = ["nas.home.arpa. A 10.99.0.50"]
[filter]
state_dir = %q
[[filter.groups]]
name = "kids"
clients = ["192.168.1.30"]
services = ["tiktok"]
[[peers]]
url = "http://%s:%d"
token_file = %q
`, s.dir, other.addr, nsWebPort, peerToken)}, up)
		peers = append(peers, newNSPeer(p, s.ns, mine))
	}
	a, b := peers[0], peers[1]

	a.call(t, "POST", "/api/filter/allow?name=first.example", nil)
	testutil.WaitFor(t, "the allow made on A on B over the veth link", 20*time.Second, func() bool {
		return slices.Contains(b.view(t).Allowed, "first.example")
	})
	const macA, macB = "02:00:5e:00:53:0a", "02:00:5e:00:53:0b"
	a.askAs(t, macA) // a device A has seen, and B has not
	b.askAs(t, macB)

	testutil.IP(t, "-n", lan.Router, "link", "set", lan.RouterIf, "down")
	linkUp := false
	t.Cleanup(func() {
		if !linkUp {
			exec.Command("ip", "-n", lan.Router, "link", "set", lan.RouterIf, "up").Run()
		}
	})
	// later waits until the wall clock is past every stamp p has made: the
	// next action is later by the rule (last writer wins by the hybrid
	// clock, whose wall part both share on this host).
	later := func(p *nsPeer) {
		_, _, walls := p.replicated(t)
		last := slices.Max(slices.Collect(maps.Values(walls)))
		for time.Now().UnixMilli() <= last {
			runtime.Gosched()
		}
	}
	// First round, both sides.
	a.call(t, "POST", "/api/filter/allow?name=same.example", nil)
	a.call(t, "POST", "/api/filter/allow?name=only-a.example", nil)
	a.call(t, "POST", "/api/filter/groups/switch?group=kids&service=tiktok&state=off", nil)
	a.call(t, "POST", "/api/dnssec/nta?name=nta-a.example&hours=2", nil)
	a.call(t, "POST", "/api/devices/ack?client=mac:"+macA, nil)
	b.call(t, "POST", "/api/filter/allow?name=same.example", nil)
	b.call(t, "POST", "/api/filter/allow?name=only-b.example", nil)
	b.call(t, "POST", "/api/filter/pause?minutes=30&client=192.168.1.30", nil)
	b.call(t, "POST", "/api/filter/groups/switch?group=kids&service=roblox&state=on", nil)
	b.call(t, "POST", "/api/dnssec/nta?name=nta-b.example&hours=2", nil)
	b.call(t, "POST", "/api/devices/ack?client=mac:"+macB, nil)
	// Second round: B undoes what A did, later; then A undoes what B did,
	// later still. Each later action is the one that must win on both.
	later(a)
	b.call(t, "DELETE", "/api/filter/allow?name=same.example", nil)
	b.call(t, "POST", "/api/filter/groups/switch?group=kids&service=tiktok&state=on", nil)
	later(b)
	a.call(t, "POST", "/api/filter/groups/switch?group=kids&service=roblox&state=off", nil)

	testutil.WaitFor(t, "a failed pull counted on both while the link is down", 20*time.Second, func() bool {
		var sa, sb struct{ Peers []struct{ Failures int } }
		a.call(t, "GET", "/api/peers", &sa)
		b.call(t, "GET", "/api/peers", &sb)
		return len(sa.Peers) == 1 && sa.Peers[0].Failures > 0 && len(sb.Peers) == 1 && sb.Peers[0].Failures > 0
	})
	if va, vb := a.view(t), b.view(t); slices.Contains(vb.Allowed, "only-a.example") || slices.Contains(va.Allowed, "only-b.example") ||
		slices.Contains(va.NTAs, "nta-b.example") || va.Paused {
		t.Fatalf("a change crossed the link while it was down:\nA %+v\nB %+v", va, vb)
	}

	testutil.IP(t, "-n", lan.Router, "link", "set", lan.RouterIf, "up")
	linkUp = true
	want := view{
		Allowed:  []string{"first.example", "only-a.example", "only-b.example"},
		Switches: map[string]bool{"tiktok": true, "roblox": false}, // B's later on, A's later off
		NTAs:     []string{"nta-a.example", "nta-b.example"},
		Acked:    []string{"mac:" + macA, "mac:" + macB},
		Paused:   true,
	}
	var va, vb view
	testutil.WaitFor(t, "both in the same state once the link is up", 30*time.Second, func() bool {
		va, vb = a.view(t), b.view(t)
		return va.equal(want) && vb.equal(want)
	})
	testutil.WaitFor(t, "the same replicated state on both, each in sync with the other", 20*time.Second, func() bool {
		da, _, _ := a.replicated(t)
		db, _, _ := b.replicated(t)
		var sa, sb struct {
			Peers []struct {
				InSync bool `json:"in_sync"`
			}
		}
		a.call(t, "GET", "/api/peers", &sa)
		b.call(t, "GET", "/api/peers", &sb)
		return da == db && len(sa.Peers) == 1 && sa.Peers[0].InSync && len(sb.Peers) == 1 && sb.Peers[0].InSync
	})
	// A device acknowledged on the other side only is not new here when
	// it first asks: B never saw macA before.
	b.askAs(t, macA)
	if v := b.view(t); !slices.Contains(v.Acked, "mac:"+macA) {
		t.Errorf("A's acknowledged device is new on B at its first query there: %+v", v)
	}
}
