package app

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/config"
)

// writeLayer writes l as the dashboard writes it.
func writeLayer(t *testing.T, path string, l config.Layer) []byte {
	t.Helper()
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLayer_changePastTheFileBoundRefusedAndNothingLost: a change that
// would make the layer file larger than config.MaxLayerBytes, which no
// start or reload reads, is refused with the reason (400), the file is
// left as it was, and the groups already made keep applying
// (docs/dashboard.md "Manage lists and groups": bad input loses nothing).
func TestLayer_changePastTheFileBoundRefusedAndNothingLost(t *testing.T) {
	r, cfg, _, base := passwordConfig(t)
	path := config.LayerPath(cfg.Filter.StateDir)
	// A layer just under the bound: a group that applies, and a group of
	// too many devices (skipped, kept in the file) as the padding.
	l := config.Layer{Groups: []config.LayerGroup{{Name: "kids", Devices: []string{"127.0.0.3"}}, {Name: "pad"}}}
	pad := make([]string, 0, config.MaxLayerMembers+1)
	for len(pad) <= config.MaxLayerMembers {
		pad = append(pad, "127.0.0.4")
	}
	l.Groups[1].Devices = pad
	b := writeLayer(t, path, l)
	l.Groups[1].Devices = append(pad, strings.Repeat("x", config.MaxLayerBytes-len(b)-300))
	before := writeLayer(t, path, l)
	if len(before) > config.MaxLayerBytes || len(before) < config.MaxLayerBytes-400 {
		t.Fatalf("padding: %d bytes", len(before))
	}
	a := r.start(t, cfg)
	if st, _, eff := a.layerInfo(); st.Err != "" || !hasGroup(eff, "kids") {
		t.Fatalf("the layer under the bound does not apply: %q", st.Err)
	}

	s := login(t, base, "pw-long-enough")
	devices := make([]string, 60)
	for i := range devices {
		devices[i] = fmt.Sprintf("127.0.1.%d", i+1)
	}
	code, body := s.do(t, "POST", "/api/filter/layer/groups?name=more&devices="+strings.Join(devices, ","), true)
	if code != http.StatusBadRequest || !strings.Contains(body, "nothing changed") {
		t.Errorf("a change past the layer file's bound: %d %s, want 400 saying nothing changed", code, body)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the layer file changed: %d bytes, was %d", len(after), len(before))
	}
	if st, _, eff := a.layerInfo(); st.Err != "" || !hasGroup(eff, "kids") {
		t.Errorf("after the refused change the layer does not apply: %q", st.Err)
	}
}

func hasGroup(c config.Config, name string) bool {
	for _, g := range c.Filter.Groups {
		if g.Name == name {
			return true
		}
	}
	return false
}

// TestLayer_removingAListAGroupUsesRefused: removing a list added from the
// dashboard that a group made there uses would leave the whole group out
// (its schedule, services and devices with it); the change is refused
// with the reason, naming the group, and the group still applies.
func TestLayer_removingAListAGroupUsesRefused(t *testing.T) {
	r, cfg, _, base := passwordConfig(t)
	path := config.LayerPath(cfg.Filter.StateDir)
	before := writeLayer(t, path, config.Layer{
		Lists:  []config.LayerList{{Name: "trk", URL: "http://127.0.0.1:1/t.txt"}},
		Groups: []config.LayerGroup{{Name: "kids", Devices: []string{"127.0.0.3"}, Lists: []string{"ads", "trk"}, Services: []string{"tiktok"}}},
	})
	a := r.start(t, cfg)
	if st, _, eff := a.layerInfo(); len(st.Skips) > 0 || !hasGroup(eff, "kids") {
		t.Fatalf("the layer does not apply: %v", st.Skips)
	}
	s := login(t, base, "pw-long-enough")
	code, body := s.do(t, "POST", "/api/filter/layer/lists/remove?name=trk", true)
	if code != http.StatusBadRequest || !strings.Contains(body, "group kids") {
		t.Errorf("removing a list a group uses: %d %s, want 400 naming group kids", code, body)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the layer file changed:\n%s", after)
	}
	if st, _, eff := a.layerInfo(); len(st.Skips) > 0 || !hasGroup(eff, "kids") {
		t.Errorf("group kids no longer applies: %v", st.Skips)
	}
}

// TestLayer_changesTOMLNoClientTheFileHas: a group made from the dashboard
// with a MAC address whose [[clients]] entry mac-… is already in the file
// (pasted from another group's lines on "changes made here") shows no
// [[clients]] entry of its own: pasted, its lines load with the file.
func TestLayer_changesTOMLNoClientTheFileHas(t *testing.T) {
	r, cfg, _, base := passwordConfig(t)
	cfg.Clients = append(cfg.Clients, config.Client{Name: "mac-aabbccddeeff", MAC: "aa:bb:cc:dd:ee:ff"})
	writeLayer(t, config.LayerPath(cfg.Filter.StateDir), config.Layer{
		Groups: []config.LayerGroup{{Name: "teens", Devices: []string{"aa:bb:cc:dd:ee:ff"}, Lists: []string{"ads"}}},
	})
	a := r.start(t, cfg)
	if st, _, _ := a.layerInfo(); len(st.Skips) > 0 || st.Err != "" {
		t.Fatalf("the layer does not apply: %v %s", st.Skips, st.Err)
	}
	s := login(t, base, "pw-long-enough")
	_, page := s.do(t, "GET", "/changes", false)
	page = html.UnescapeString(page)
	if !strings.Contains(page, "[[filter.groups]]\nname = \"teens\"\nclients = [\"mac-aabbccddeeff\"]") {
		t.Fatalf("the changes page lacks the group's TOML:\n%s", page)
	}
	if strings.Contains(page, "[[clients]]\nname = \"mac-aabbccddeeff\"") || strings.Contains(page, `settings.clients = [ { name = "mac-aabbccddeeff"`) {
		t.Error("the changes page repeats a [[clients]] entry the file has: pasted, the file gets a duplicate name")
	}
}
