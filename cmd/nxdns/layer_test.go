package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckReportsTheDashboardLayer: check names the lists and groups the
// dashboard added over the file (config.Layer in filter.state_dir), each
// entry it would skip with the reason — a group named as the file's, a
// list that is not http(s) — and exits 0: the layer is not the file's
// problem. A layer file edited by hand into invalid JSON is reported as
// ignored, and check still passes the file.
func TestCheckReportsTheDashboardLayer(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nxdns.toml")
	conf := `[[upstreams]]
url = "tls://127.0.0.1:8853"
tls_name = "dns.test"
[filter]
state_dir = "` + dir + `"
[[filter.lists]]
name = "ads"
url = "https://lists.example/ads.txt"
[[filter.groups]]
name = "parents"
clients = ["192.168.1.10"]
lists = ["ads"]
`
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	layer := filepath.Join(dir, "dashboard-config.json")
	if err := os.WriteFile(layer, []byte(`{
  "lists": [{"name": "trackers", "url": "https://lists.example/t.txt"}, {"name": "old", "url": "ftp://lists.example/x"}],
  "lists_off": ["ads"],
  "groups": [{"name": "kids", "devices": ["192.168.1.20"], "lists": ["trackers"]}, {"name": "parents", "devices": ["192.168.1.30"]}]
}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := nxdns(t, "check", "--config", path)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"dashboard lists and groups over this file (in " + layer + "):",
		"  list trackers (block)  https://lists.example/t.txt\n", "  list ads of the file switched off\n",
		"  group kids: 192.168.1.20 → trackers\n", `skipped: list old: url: scheme "ftp": want http:// or https://`,
		`skipped: group parents: the configuration file has a group named "parents"`} {
		if !strings.Contains(out, want) {
			t.Errorf("check lacks %q:\n%s", want, out)
		}
	}

	if err := os.WriteFile(layer, []byte(`{"groups": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = nxdns(t, "check", "--config", path)
	if code != exitOK || !strings.Contains(out, "dashboard lists and groups: ignored, the file alone applies: ") || !strings.Contains(out, "not a layer file") {
		t.Errorf("a damaged layer: exit %d:\n%s", code, out)
	}
}
