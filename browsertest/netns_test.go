package browsertest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The LAN of TestBrowser_netnsDevice: two network namespaces of the
// test's own, "host" (nxdns, chromium, the fake upstream, the test itself)
// and "phone" (kdig), joined by a veth pair whose phone end has a fixed
// MAC. Nothing leaves the two namespaces; the machine's own network is
// never touched.
const (
	phoneNSEnv = "NXDNS_BROWSER_PHONE_NS" // set in the re-run child: the phone's namespace
	phoneMAC   = "02:00:5e:10:00:02"
	phoneName  = "emmas-tablet" // its DHCP lease's host name
)

var (
	hostAddr  = netip.MustParseAddr("10.99.0.1")
	phoneAddr = netip.MustParseAddr("10.99.0.2")
)

// TestBrowser_netnsDevice: a phone in a network namespace of its own asks
// nxdns (the real binary, in the "host" namespace) with kdig; the host's
// neighbour table learns its MAC, and the devices page shows it as new,
// by the name of its lease (a dnsmasq lease-file fixture) and its MAC.
// The parent acknowledges it there; it moves to the known devices. On the
// groups page TikTok is switched off for the phone's group, and kdig from
// the phone then gets the block. Needs root and ip(8) (named namespaces,
// a veth pair); skipped otherwise.
func TestBrowser_netnsDevice(t *testing.T) {
	phone := os.Getenv(phoneNSEnv)
	if phone == "" {
		runInHostNS(t)
		return
	}
	leases := filepath.Join(t.TempDir(), "dnsmasq.leases")
	os.WriteFile(leases, []byte("4102444800 "+phoneMAC+" "+phoneAddr.String()+" "+phoneName+" *\n"), 0o644)
	s := newStackOn(t, []netip.Addr{hostAddr}, fmt.Sprintf(`[devices]
neighbours = true
[[devices.leases]]
format = "dnsmasq"
path = %q
[dnssec]
mode = "off" # the fake upstream signs nothing: no shadow-mode banner in the pictures
[[filter.groups]]
name = "kids"
clients = [%q]
safe_search = ["google", "youtube"]
[[filter.groups]]
name = "school-nights"
clients = [%q]
services = ["youtube", "roblox"]
[[filter.groups.schedule]]
days = ["sun", "mon", "tue", "wed", "thu"]
from = "20:00"
to = "07:00"
`, leases, phoneAddr, phoneAddr))

	if got := phoneLookup(t, phone, s.dnsPort, "www.tiktok.com"); got == "0.0.0.0" || got == "" {
		t.Fatalf("www.tiktok.com from the phone before the switch: %q, want the upstream's answer", got)
	}
	for i := range 3 {
		phoneLookup(t, phone, s.dnsPort, fmt.Sprintf("homework%d.example", i))
	}

	ctx := browserCtx(t)
	do(t, ctx, chromedp.Navigate(s.web+"/"), chromedp.WaitVisible(css("#password")),
		chromedp.SendKeys(css("#password"), "household secret"), chromedp.Submit(css("#password")), chromedp.WaitVisible(css("#total")))

	// The device is new, by MAC, with its lease's name; the page is read
	// again until the neighbour table has named it (the kernel learns the
	// MAC with the first packet's ARP, nxdns from its notification).
	newRow := `#new-devices tr.new button[data-client="mac:` + phoneMAC + `"]`
	do(t, ctx, chromedp.Navigate(s.web+"/devices"), chromedp.WaitVisible(css("h1")))
	pollReload(t, ctx, `document.querySelector('`+newRow+`') !== null`)
	row := get(t, ctx, chromedp.Evaluate[string](`document.querySelector('`+newRow+`').closest("tr").innerText`))
	for _, want := range []string{phoneMAC, "new", phoneName, phoneAddr.String()} {
		if !strings.Contains(row, want) {
			t.Fatalf("new device row %q lacks %q", row, want)
		}
	}
	familyShots(t, ctx, "family-devices", "", "-dark", "-phone")

	// Acknowledged through the page: known, no longer new.
	do(t, ctx, chromedp.Click(css(newRow)))
	poll(t, ctx, `document.querySelector('`+newRow+`') === null && document.querySelector("#known-devices") !== null`)
	known := get(t, ctx, chromedp.Text(css("#known-devices")))
	if !strings.Contains(known, phoneMAC) || !strings.Contains(known, phoneName) {
		t.Fatalf("known devices %q, want the acknowledged phone", known)
	}

	// TikTok switched off for the phone's group through the groups page.
	tiktok := `button[data-switch="service"][data-group="kids"][data-id="tiktok"]`
	do(t, ctx, chromedp.Navigate(s.web+"/groups"), chromedp.WaitVisible(css(tiktok+`[data-state="on"]`)),
		chromedp.Click(css(tiktok+`[data-state="on"]`)), chromedp.WaitVisible(css(tiktok+`[data-state="config"]`)))
	if label := get(t, ctx, chromedp.Text(css(tiktok+`[data-state="off"]`))); label != "TikTok: blocked" {
		t.Fatalf("after the click TikTok's switch says %q", label)
	}
	if got := phoneLookup(t, phone, s.dnsPort, "www.tiktok.com"); got != "0.0.0.0" {
		t.Fatalf("www.tiktok.com from the phone after the switch: %q, want 0.0.0.0", got)
	}
	familyShots(t, ctx, "family-groups", "", "-phone")
}

// runInHostNS builds the two namespaces and the veth pair, runs this test
// again inside "host" and takes its verdict.
func runInHostNS(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and a veth pair")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	id := strconv.Itoa(os.Getpid() % 100000)
	host, phone := "nxbh-"+id, "nxbp-"+id
	for _, ns := range []string{host, phone} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot create a network namespace here (ip netns add): %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	for _, c := range [][]string{
		{"-n", host, "link", "add", "vh", "address", "02:00:5e:10:00:01", "type", "veth", "peer", "name", "vp", "address", phoneMAC, "netns", phone},
		{"-n", host, "addr", "add", hostAddr.String() + "/24", "dev", "vh"},
		{"-n", host, "link", "set", "vh", "up"},
		{"-n", host, "link", "set", "lo", "up"},
		{"-n", phone, "addr", "add", phoneAddr.String() + "/24", "dev", "vp"},
		{"-n", phone, "link", "set", "vp", "up"},
		{"-n", phone, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", c...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	cmd := exec.Command("ip", "netns", "exec", host, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=4m")
	cmd.Env = append(os.Environ(), phoneNSEnv+"="+phone)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("in the host namespace: %v\n%s", err, out)
	}
}

// phoneLookup asks nxdns for name's A record with kdig from the phone's
// namespace and returns the short answer.
func phoneLookup(t *testing.T, phone string, port int, name string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", phone, "kdig", "@"+hostAddr.String(), "-p", strconv.Itoa(port),
		"+timeout=5", "+retry=0", "+short", name, "A").CombinedOutput()
	if err != nil {
		t.Fatalf("kdig %s from the phone: %v\n%s", name, err, out)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1] // after a CNAME chain, the address
}

// pollReload is poll for a condition only a fresh page can show: the page
// is reloaded between tries.
func pollReload(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	for range 60 {
		if get(t, ctx, chromedp.Evaluate[bool](cond)) {
			return
		}
		do(t, ctx, chromedp.Sleep(500*time.Millisecond), chromedp.Reload(), chromedp.WaitVisible(css("h1")))
	}
	t.Fatalf("not shown after 60 reloads: %s", cond)
}

// familyShots saves the open page for docs/how-to/for-families.md in the
// variants named: "" a desktop, "-dark" a desktop in dark mode, "-phone"
// a phone.
func familyShots(t *testing.T, ctx context.Context, name string, variants ...string) {
	t.Helper()
	if os.Getenv("NXDNS_SCREENSHOTS") == "" {
		return
	}
	for _, v := range []struct {
		suffix, scheme string
		w, h           int64
	}{{"", "light", 1280, 720}, {"-dark", "dark", 1280, 720}, {"-phone", "light", 390, 844}} {
		if !slices.Contains(variants, v.suffix) {
			continue
		}
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v.scheme}}}); err != nil {
			t.Fatal(err)
		}
		do(t, ctx, chromedp.EmulateViewport(v.w, v.h), chromedp.Reload(), chromedp.WaitVisible(css("h1")))
		shot(t, ctx, name+v.suffix)
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.EmulateViewport(1000, 700), chromedp.Reload(), chromedp.WaitVisible(css("h1")))
}
