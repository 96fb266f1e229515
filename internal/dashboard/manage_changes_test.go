package dashboard

import (
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/config"
)

// One phone's MAC in two dashboard groups has one [[clients]] entry in the
// effective configuration; "Changes made here" shows it in the first
// group's lines only, and the second group's lines say where it is, so
// the lines of every group pasted into the file make no duplicate name.
func TestLayerChanges_macInTwoGroupsIsOneClientEntry(t *testing.T) {
	const mac = "aa:bb:cc:dd:ee:01"
	file := config.Default()
	layer := config.Layer{Groups: []config.LayerGroup{
		{Name: "kids", Devices: []string{mac}},
		{Name: "homework", Devices: []string{mac, "192.0.2.7"}},
	}}
	eff, skips := layer.Apply(file)
	if len(skips) != 0 {
		t.Fatalf("the layer did not apply: %v", skips)
	}
	d := New(Deps{Layer: func() LayerInfo {
		return LayerInfo{State: config.LayerState{Path: "layer.json", Layer: layer}, File: file, Effective: eff}
	}})
	var all, allNix string
	for _, c := range d.layerChanges() {
		all += c.TOML + "\n"
		allNix += c.Nix + "\n"
	}
	name := "mac-aabbccddee01"
	if n := strings.Count(all, "[[clients]]\nname = \""+name+"\""); n != 1 {
		t.Errorf("the MAC's [[clients]] entry is in the pasted TOML %d times, want once:\n%s", n, all)
	}
	if n := strings.Count(allNix, "name = \""+name+"\"; mac"); n != 1 {
		t.Errorf("the MAC's clients entry is in the pasted Nix %d times, want once:\n%s", n, allNix)
	}
	if !strings.Contains(all, "is in group kids's lines") {
		t.Errorf("the second group's lines do not say where the entry is:\n%s", all)
	}
	if !strings.Contains(all, "clients = [\""+name+"\"]\n") || !strings.Contains(all, "clients = [\""+name+"\", \"192.0.2.7\"]") {
		t.Errorf("each group should still name the device:\n%s", all)
	}
}
