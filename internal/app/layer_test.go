package app

import (
	"fmt"
	"html"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/web"
)

// blockedFrom is blockedVia from another loopback source address: a
// device of its own as the groups see it.
func blockedFrom(t *testing.T, src, addr, name string) bool {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Answer) == 1 && resp.Answer[0].(*dns.A).A.Equal(net.IPv4zero)
}

// layerRoutes are the layer's mutating routes, with a harmless request each.
var layerRoutes = []string{
	"/api/filter/layer/lists?name=x&url=http://127.0.0.1:1/x",
	"/api/filter/layer/lists/remove?name=x",
	"/api/filter/layer/lists/enable?name=ads&on=false",
	"/api/filter/layer/groups?name=g&devices=127.0.0.9",
	"/api/filter/layer/groups/remove?name=g",
}

// TestLayer_listsAndGroupsFromTheDashboard: through the real App with a
// password, each layer route refuses a request without a login, without
// the CSRF token and from another origin, and a read token; a list that
// is not http(s), a group named as the file's, a name with markup, a
// schedule that never matches and a misspelt service are refused with
// the reason and change nothing. A list added (served on loopback) is
// downloaded and blocks; a group with a device (a second loopback
// address), blocked services and a schedule changes that device's
// answers and no other's, and moving its schedule to another day changes
// them back; a file list switched off stops blocking. Each change shows
// on "changes made here" as TOML.
func TestLayer_listsAndGroupsFromTheDashboard(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "0.0.0.0 tracker.example\n")
	}))
	defer srv.Close()
	r, cfg, dnsAddr, base := passwordConfig(t)
	cfg.Filter.Groups = append(cfg.Filter.Groups, config.FilterGroup{Name: "parents", Clients: []string{"192.168.1.99"}, Lists: []string{"ads"}})
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel()})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false // the test stops it to start again
	t.Cleanup(func() {
		if !stopped {
			shutdown(t, a)
		}
	})
	s := login(t, base, "pw-long-enough")
	read, err := web.AddToken(cfg.Filter.StateDir, "reader", web.ScopeRead, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	anon := &session{c: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, base: base}
	for _, route := range layerRoutes {
		if code, _ := anon.do(t, "POST", route, false); code != http.StatusUnauthorized {
			t.Errorf("%s without a login: %d, want 401", route, code)
		}
		if code, _ := s.do(t, "POST", route, false); code != http.StatusForbidden {
			t.Errorf("%s without the CSRF token: %d, want 403", route, code)
		}
		for _, h := range [][2]string{{"Origin", "http://evil.example"}, {"Authorization", "Bearer " + read}} {
			req, _ := http.NewRequest("POST", base+route, nil)
			req.Header.Set("X-CSRF-Token", s.csrf)
			req.Header.Set(h[0], h[1])
			resp, err := s.c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s with %s: %d, want 403", route, h[0], resp.StatusCode)
			}
		}
	}
	ctl, err := web.AddToken(cfg.Filter.StateDir, "ctl", web.ScopeControl, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", base+"/api/filter/layer/groups/remove?name=nothing", nil)
	req.Header.Set("Authorization", "Bearer "+ctl)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a control token on a layer route: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	layerPath := config.LayerPath(cfg.Filter.StateDir)
	if _, err := os.Stat(layerPath); !os.IsNotExist(err) {
		t.Fatalf("a refused request wrote the layer file: %v", err)
	}

	for _, bad := range []struct{ route, want string }{
		{"/api/filter/layer/lists?name=trk&url=" + url.QueryEscape("ftp://127.0.0.1/x"), "want http:// or https://"},
		{"/api/filter/layer/lists?name=" + url.QueryEscape("<b>x</b>") + "&url=" + url.QueryEscape(srv.URL), "letters, digits"},
		{"/api/filter/layer/groups?name=parents&devices=127.0.0.3", `the configuration file has a group named \"parents\"`},
		{"/api/filter/layer/groups?name=" + url.QueryEscape("<b>kids</b>") + "&devices=127.0.0.3", "letters, digits"},
		{"/api/filter/layer/groups?name=kids&devices=127.0.0.3&from=07:00&to=07:00", "an empty window"},
		{"/api/filter/layer/groups?name=kids&devices=127.0.0.3&services=tiktokk", "tiktokk"},
		{"/api/filter/layer/groups?name=kids&devices=" + url.QueryEscape("<script>"), "not an IP address"},
	} {
		code, body := s.do(t, "POST", bad.route, true)
		if code != http.StatusBadRequest || !strings.Contains(body, bad.want) || strings.Contains(body, "<b>") || strings.Contains(body, "<script>") {
			t.Errorf("%s: %d %s, want 400 saying %s, markup escaped", bad.route, code, body, bad.want)
		}
	}
	if _, err := os.Stat(layerPath); !os.IsNotExist(err) {
		t.Fatalf("a refused change wrote the layer file: %v", err)
	}

	// A list added from the dashboard is downloaded and blocks.
	if code, body := s.do(t, "POST", "/api/filter/layer/lists?name=trk&url="+url.QueryEscape(srv.URL+"/t.txt"), true); code != http.StatusOK || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("add list: %d %s", code, body)
	}
	testutil.WaitFor(t, "the added list's download", 10*time.Second, func() bool {
		for _, l := range a.filter.Snapshot().Lists {
			if l.Name == "trk" && l.Rules == 1 {
				return true
			}
		}
		return false
	})
	if !blockedVia(t, dnsAddr, "tracker.example.") {
		t.Fatal("tracker.example not blocked by the list added")
	}

	// A group with a device, a service and a window that is on now.
	if blockedFrom(t, "127.0.0.3", dnsAddr, "www.tiktok.com.") {
		t.Fatal("TikTok blocked before the group")
	}
	kids := "/api/filter/layer/groups?name=kids&devices=127.0.0.3&lists=ads,trk&services=tiktok&from=00:00&to=24:00&days="
	if code, body := s.do(t, "POST", kids, true); code != http.StatusOK {
		t.Fatalf("make group: %d %s", code, body)
	}
	if !blockedFrom(t, "127.0.0.3", dnsAddr, "www.tiktok.com.") {
		t.Error("TikTok not blocked for the kids' device inside its window")
	}
	if blockedVia(t, dnsAddr, "www.tiktok.com.") {
		t.Error("TikTok blocked for a device outside the group")
	}
	// The same group, its window moved to the day after tomorrow: the
	// device is filtered as one in no group again. Last write wins.
	later := strings.ToLower(time.Now().AddDate(0, 0, 2).Weekday().String()[:3])
	if code, body := s.do(t, "POST", kids+later, true); code != http.StatusOK {
		t.Fatalf("edit group: %d %s", code, body)
	}
	if blockedFrom(t, "127.0.0.3", dnsAddr, "www.tiktok.com.") {
		t.Error("TikTok still blocked for the kids' device outside its window")
	}

	// A file list switched off stops blocking; removing the change brings it back.
	if !blockedVia(t, dnsAddr, "ads.example.") {
		t.Fatal("ads.example not blocked by the file's list")
	}
	if code, body := s.do(t, "POST", "/api/filter/layer/lists/enable?name=ads&on=false", true); code != http.StatusOK {
		t.Fatalf("switch off: %d %s", code, body)
	}
	if blockedVia(t, dnsAddr, "ads.example.") {
		t.Error("ads.example blocked after its list was switched off")
	}

	// A switch of the file's group turned on the groups page shows too.
	if code, body := s.do(t, "POST", "/api/filter/groups/switch?group=parents&service=tiktok&state=on", true); code != http.StatusOK {
		t.Fatalf("switch: %d %s", code, body)
	}
	_, page := s.do(t, "GET", "/changes", false)
	page = html.UnescapeString(page)
	if !strings.Contains(page, "group parents: switches changed on the Groups page: tiktok blocked") ||
		!strings.Contains(page, "services = [\"tiktok\"]\nsafe_search = []") ||
		!strings.Contains(page, `data-switch="service" data-group="parents" data-id="tiktok" data-state="config"`) {
		t.Error("the changes page does not show the switch turned on the groups page with its TOML and drop button")
	}
	for _, want := range []string{
		"[[filter.lists]]\nname = \"trk\"\nurl = \"" + srv.URL + "/t.txt\"",
		// ads is switched off: the group as it applies has trk alone.
		"[[filter.groups]]\nname = \"kids\"\nclients = [\"127.0.0.3\"]\nlists = [\"trk\"]\nservices = [\"tiktok\"]",
		"days = [\"" + later + "\"]\nfrom = \"00:00\"\nto = \"24:00\"",
		`remove the [[filter.lists]] entry with name = "ads"`,
		`services.nxdns.settings.filter.groups = [ {`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("changes page lacks %q", want)
		}
	}
	if code, page := s.do(t, "GET", "/manage", false); code != http.StatusOK || !strings.Contains(page, `data-group="kids"`) || !strings.Contains(page, `data-list="trk"`) {
		t.Errorf("manage page: %d, kids or trk missing", code)
	}
	if code, _ := s.do(t, "POST", "/api/filter/layer/lists/remove?name=ads", true); code != http.StatusOK || !blockedVia(t, dnsAddr, "ads.example.") {
		t.Error("dropping the switch-off did not bring the file's list back")
	}

	// A layer file edited by hand into invalid JSON: a reload reports it
	// and runs on the file alone; a change refuses to overwrite it.
	damaged := []byte(`{"groups": [{"name": "kids",`)
	if err := os.WriteFile(layerPath, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(cfg); err != nil {
		t.Fatalf("reload with a damaged layer: %v", err)
	}
	if blockedVia(t, dnsAddr, "tracker.example.") {
		t.Error("the damaged layer's list still blocks")
	}
	if code, body := s.do(t, "POST", "/api/filter/layer/groups/remove?name=kids", true); code != http.StatusConflict || !strings.Contains(body, "not a layer file") {
		t.Errorf("a change over a damaged layer: %d %s, want 409", code, body)
	}
	if b, _ := os.ReadFile(layerPath); string(b) != string(damaged) {
		t.Errorf("the damaged layer file was overwritten: %s", b)
	}
	if _, page := s.do(t, "GET", "/manage", false); !strings.Contains(page, "not a layer file") {
		t.Error("the manage page does not say the layer file is damaged")
	}
	if len(r.observed.FilterMessage("dashboard changes ignored: the layer file cannot be used; the configuration file alone applies").All()) == 0 {
		t.Error("the damaged layer was not logged")
	}
	// A start with it runs on the file alone too.
	shutdown(t, a)
	stopped = true
	a2 := r.start(t, cfg)
	if st, _, _ := a2.layerInfo(); !strings.Contains(st.Err, "not a layer file") || !blockedVia(t, dnsAddr, "ads.example.") {
		t.Errorf("start with a damaged layer: %q", st.Err)
	}
}

// askWithMAC asks from a trusted forwarder (127.0.0.2) naming the device
// by its MAC (EDNS0 option 65001, as dnsmasq's add-mac): whether the
// answer is the block.
func askWithMAC(t *testing.T, addr, name string, mac net.HardwareAddr) bool {
	t.Helper()
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_LOCAL{Code: 65001, Data: mac})
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)}}}
	resp, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Answer) == 1 && resp.Answer[0].(*dns.A).A.Equal(net.IPv4zero)
}

// TestLayer_deviceByMACPutInAGroup: the devices page's "put in group"
// puts a device known by its MAC address (behind a trusted forwarder) in
// a group made from the dashboard, and that device's answers change —
// not the forwarder's other devices'; a group of the file is refused;
// taking the device out changes them back. The /changes TOML names the
// device as a [[clients]] entry with its MAC.
func TestLayer_deviceByMACPutInAGroup(t *testing.T) {
	r, cfg, dnsAddr, base := passwordConfig(t)
	cfg.DNS.TrustedForwarders = []string{"127.0.0.2"}
	cfg.Filter.Groups = append(cfg.Filter.Groups, config.FilterGroup{Name: "parents", Clients: []string{"192.168.1.99"}, Lists: []string{"ads"}})
	r.start(t, cfg)
	s := login(t, base, "pw-long-enough")
	tablet, other := net.HardwareAddr{0xaa, 0xbb, 0xcc, 0, 0x11, 0x22}, net.HardwareAddr{0xaa, 0xbb, 0xcc, 0, 0x11, 0x33}
	if code, body := s.do(t, "POST", "/api/filter/layer/groups?name=kids&devices=192.168.1.50&services=tiktok", true); code != http.StatusOK {
		t.Fatalf("make group: %d %s", code, body)
	}
	if askWithMAC(t, dnsAddr, "www.tiktok.com.", tablet) {
		t.Fatal("TikTok blocked for the tablet before it is in the group")
	}
	if code, body := s.do(t, "POST", "/api/filter/layer/groups/device?name=parents&in=true&device="+tablet.String(), true); code != http.StatusBadRequest || !strings.Contains(body, "configuration file's") {
		t.Errorf("a file group: %d %s, want 400", code, body)
	}
	if code, body := s.do(t, "POST", "/api/filter/layer/groups/device?name=kids&in=true&device="+tablet.String(), true); code != http.StatusOK || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("put in group: %d %s", code, body)
	}
	if !askWithMAC(t, dnsAddr, "www.tiktok.com.", tablet) {
		t.Error("TikTok not blocked for the tablet in the kids' group")
	}
	if askWithMAC(t, dnsAddr, "www.tiktok.com.", other) {
		t.Error("TikTok blocked for another device behind the same forwarder")
	}
	_, page := s.do(t, "GET", "/changes", false)
	if want := "[[clients]]\nname = \"mac-aabbcc001122\"\nmac = \"aa:bb:cc:00:11:22\""; !strings.Contains(html.UnescapeString(page), want) {
		t.Errorf("changes page lacks %q", want)
	}
	if code, body := s.do(t, "POST", "/api/filter/layer/groups/device?name=kids&in=false&device="+tablet.String(), true); code != http.StatusOK {
		t.Fatalf("take out: %d %s", code, body)
	}
	if askWithMAC(t, dnsAddr, "www.tiktok.com.", tablet) {
		t.Error("TikTok still blocked for the tablet taken out of the group")
	}
}
