package config

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layerFile is a valid configuration file with one list, one group and
// one device, as a household's might be.
func layerFile(t *testing.T) Config {
	t.Helper()
	c, err := Load(strings.NewReader(`
[[upstreams]]
url = "tls://127.0.0.1:853"
tls_name = "dns.example"
[[clients]]
name = "laptop"
ip = "192.168.1.10"
[filter]
state_dir = "/var/lib/nxdns"
[[filter.lists]]
name = "ads"
url = "https://lists.example/ads.txt"
[[filter.groups]]
name = "parents"
clients = ["laptop"]
lists = ["ads"]
`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func skipItems(skips []LayerSkip) []string {
	var out []string
	for _, s := range skips {
		out = append(out, s.Item)
	}
	return out
}

// TestLayer_Apply_mergesOverTheFile: the file first, the layer on top — a
// list added, a file list switched off (and out of the file's group), a
// group with an address, a [[clients]] name and a MAC address (which gets
// a [[clients]] entry of its own); the result validates.
func TestLayer_Apply_mergesOverTheFile(t *testing.T) {
	file := layerFile(t)
	l := Layer{
		Lists:    []LayerList{{Name: "trackers", URL: "http://127.0.0.1:8080/t.txt"}},
		ListsOff: []string{"ads"},
		Groups: []LayerGroup{{Name: "kids", Devices: []string{"192.168.1.20", "laptop", "AA:BB:CC:00:11:22"},
			Lists: []string{"trackers", "ads"}, Schedule: []Window{{Days: []string{"mon"}, From: "19:00", To: "07:00"}},
			Services: []string{"tiktok"}, SafeSearch: []string{"google"}, YouTubeMode: "moderate"}},
	}
	eff, skips := l.Apply(file)
	if len(skips) != 0 {
		t.Fatalf("skips: %v", skips)
	}
	if ps := Validate(eff); len(ps) > 0 {
		t.Fatalf("effective configuration invalid: %v", ps)
	}
	if len(eff.Filter.Lists) != 1 || eff.Filter.Lists[0].Name != "trackers" {
		t.Errorf("lists = %+v, want trackers alone", eff.Filter.Lists)
	}
	if g := eff.Filter.Groups[0]; g.Name != "parents" || len(g.Lists) != 0 {
		t.Errorf("file group = %+v, want parents without the list switched off", g)
	}
	kids := eff.Filter.Groups[1]
	if want := []string{"192.168.1.20", "laptop", "mac-aabbcc001122"}; !slices.Equal(kids.Clients, want) {
		t.Errorf("kids clients = %v, want %v", kids.Clients, want)
	}
	if !slices.Equal(kids.Lists, []string{"trackers"}) || kids.YouTubeMode != "moderate" || len(kids.Schedule) != 1 {
		t.Errorf("kids = %+v", kids)
	}
	if last := eff.Clients[len(eff.Clients)-1]; last.Name != "mac-aabbcc001122" || last.MAC != "aa:bb:cc:00:11:22" {
		t.Errorf("made client = %+v", last)
	}
	if len(file.Filter.Lists) != 1 || len(file.Filter.Groups) != 1 || len(file.Clients) != 1 || len(file.Filter.Groups[0].Lists) != 1 {
		t.Errorf("the file's configuration was changed: %+v", file.Filter)
	}
}

// TestLayer_Apply_invalidEntriesSkippedByName: each entry that fails the
// file's validation is reported by name and left out; the rest applies.
// A group or list whose name the file has is refused with a clear message.
func TestLayer_Apply_invalidEntriesSkippedByName(t *testing.T) {
	file := layerFile(t)
	l := Layer{
		Lists: []LayerList{
			{Name: "ftp", URL: "ftp://lists.example/x"},
			{Name: "ads", URL: "https://other.example/ads"},
			{Name: "bad name!", URL: "https://lists.example/y"},
			{Name: "ok", URL: "https://lists.example/ok"},
		},
		ListsOff: []string{"gone"},
		Groups: []LayerGroup{
			{Name: "parents", Devices: []string{"192.168.1.30"}},
			{Name: "laptop"},
			{Name: "never", Schedule: []Window{{From: "25:00", To: "07:00"}}},
			{Name: "typo", Services: []string{"tiktokk"}},
			{Name: "uses-ftp", Lists: []string{"ftp"}},
			{Name: "stranger", Devices: []string{"nobody-knows-me"}},
			{Name: "kids", Devices: []string{"192.168.1.20"}, Lists: []string{"ok"}},
		},
	}
	eff, skips := l.Apply(file)
	if ps := Validate(eff); len(ps) > 0 {
		t.Fatalf("effective configuration invalid: %v", ps)
	}
	got := skipItems(skips)
	slices.Sort(got)
	want := []string{"group laptop", "group never", "group parents", "group stranger", "group typo", "group uses-ftp", "list ads", "list bad name!", "list ftp", "list gone"}
	if !slices.Equal(got, want) {
		t.Errorf("skipped %v, want %v", got, want)
	}
	for _, s := range skips {
		switch s.Item {
		case "group parents":
			if !strings.Contains(s.Reason, `the configuration file has a group named "parents"`) {
				t.Errorf("group parents: %q", s.Reason)
			}
		case "list ftp":
			if !strings.Contains(s.Reason, "want http:// or https://") {
				t.Errorf("list ftp: %q", s.Reason)
			}
		case "group typo":
			if !strings.Contains(s.Reason, "tiktokk") {
				t.Errorf("group typo: %q", s.Reason)
			}
		}
	}
	names := func() (out []string) {
		for _, x := range eff.Filter.Lists {
			out = append(out, x.Name)
		}
		for _, g := range eff.Filter.Groups {
			out = append(out, g.Name)
		}
		return out
	}()
	if want := []string{"ads", "ok", "parents", "kids"}; !slices.Equal(names, want) {
		t.Errorf("effective lists and groups %v, want %v", names, want)
	}
}

// TestLayer_Apply_tenThousandEntriesBounded: a layer grown to 10 000
// groups and lists (a script in a loop) applies within the caps, says
// what it left out, and stays valid.
func TestLayer_Apply_tenThousandEntriesBounded(t *testing.T) {
	file := layerFile(t)
	var l Layer
	for i := range 5000 {
		l.Lists = append(l.Lists, LayerList{Name: fmt.Sprintf("l%d", i), URL: fmt.Sprintf("https://lists.example/%d", i)})
		l.Groups = append(l.Groups, LayerGroup{Name: fmt.Sprintf("g%d", i), Devices: []string{fmt.Sprintf("10.%d.%d.1", i/256, i%256)}})
	}
	eff, skips := l.Apply(file)
	if ps := Validate(eff); len(ps) > 0 {
		t.Fatalf("effective configuration invalid: %v", ps[0])
	}
	if n := len(eff.Filter.Lists); n != MaxFilterLists {
		t.Errorf("%d lists, want the cap %d", n, MaxFilterLists)
	}
	if n := len(eff.Filter.Groups); n != 1+MaxLayerGroups {
		t.Errorf("%d groups, want the file's and %d", n, MaxLayerGroups)
	}
	if want := 10000 - (MaxFilterLists - 1) - MaxLayerGroups; len(skips) != want {
		t.Errorf("%d skips, want %d", len(skips), want)
	}
}

// TestLoadLayer_invalidJSONReportedAndIgnored: a layer file edited by hand
// into invalid JSON is reported, naming the file, and ignored as a whole:
// the file's configuration applies alone (the daemon runs on it).
func TestLoadLayer_invalidJSONReportedAndIgnored(t *testing.T) {
	dir := t.TempDir()
	file := layerFile(t)
	file.Filter.StateDir = dir
	if err := os.WriteFile(filepath.Join(dir, LayerFile), []byte(`{"lists": [{"name": "x",`), 0o600); err != nil {
		t.Fatal(err)
	}
	eff, st := LoadLayer(file)
	if !strings.Contains(st.Err, LayerFile) || !strings.Contains(st.Err, "not a layer file") {
		t.Errorf("Err = %q, want the file named as not a layer file", st.Err)
	}
	if len(eff.Filter.Lists) != 1 || len(eff.Filter.Groups) != 1 {
		t.Errorf("effective = %+v, want the file alone", eff.Filter)
	}

	b, _ := json.Marshal(Layer{Groups: []LayerGroup{{Name: "kids", Devices: []string{"192.168.1.20"}}}})
	if err := os.WriteFile(filepath.Join(dir, LayerFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	eff, st = LoadLayer(file)
	if st.Err != "" || len(eff.Filter.Groups) != 2 {
		t.Errorf("fixed file: err %q, groups %+v", st.Err, eff.Filter.Groups)
	}
}

// TestLayer_TOML_pastedGivesTheSameConfiguration: the TOML the "changes
// made here" page shows, appended to the file, loads into the same
// lists, groups and clients as the file with the layer.
func TestLayer_TOML_pastedGivesTheSameConfiguration(t *testing.T) {
	src := `
[[upstreams]]
url = "tls://127.0.0.1:853"
tls_name = "dns.example"
[filter]
state_dir = "/var/lib/nxdns"
`
	file, err := Load(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	l := Layer{
		Lists: []LayerList{{Name: "ads", URL: `https://lists.example/a"b\c`}},
		Groups: []LayerGroup{{Name: "kids", Devices: []string{"192.168.1.20", "aa:bb:cc:00:11:22"}, Lists: []string{"ads"},
			Schedule: []Window{{Days: []string{"mon", "tue"}, From: "19:00", To: "07:00"}, {From: "12:00", To: "13:00"}},
			Services: []string{"tiktok"}, SafeSearch: []string{"google", "youtube"}, YouTubeMode: "moderate"}},
	}
	eff, skips := l.Apply(file)
	if len(skips) > 0 {
		t.Fatal(skips)
	}
	pasted := src + "\n" + l.Lists[0].TOML() + "\n" + l.Groups[0].GroupTOML(eff)
	got, err := Load(strings.NewReader(pasted))
	if err != nil {
		t.Fatalf("pasted TOML does not load: %v\n%s", err, pasted)
	}
	if fmt.Sprint(got.Filter.Lists, got.Filter.Groups, got.Clients) != fmt.Sprint(eff.Filter.Lists, eff.Filter.Groups, eff.Clients) {
		t.Errorf("pasted:\n%+v\nlayer:\n%+v\nTOML:\n%s", got.Filter, eff.Filter, pasted)
	}
}

// TestLayer_Nix_parses: the NixOS lines the "changes made here" page
// shows for a list and a group (MAC device, schedule, switches) are a
// valid Nix module body (nix-instantiate --parse), quotes and all.
func TestLayer_Nix_parses(t *testing.T) {
	nix, err := exec.LookPath("nix-instantiate")
	if err != nil {
		t.Skip("nix-instantiate not installed")
	}
	file := layerFile(t)
	l := Layer{
		Lists: []LayerList{{Name: "trk", URL: `https://lists.example/a"b${x}\c`, Kind: "allow"}},
		Groups: []LayerGroup{{Name: "kids", Devices: []string{"192.168.1.20", "aa:bb:cc:00:11:22"}, Lists: []string{"trk"},
			Schedule: []Window{{Days: []string{"mon"}, From: "19:00", To: "07:00"}, {From: "12:00", To: "13:00"}},
			Services: []string{"tiktok"}, SafeSearch: []string{"google"}, YouTubeMode: "moderate"}},
	}
	eff, skips := l.Apply(file)
	if len(skips) > 0 {
		t.Fatal(skips)
	}
	// Two definitions of one option in a module body are one attribute set
	// each here: the page shows them one by one.
	for _, body := range []string{l.Lists[0].Nix(), l.Groups[0].GroupNix(eff)} {
		src := "{ ... }: {\n" + body + "\n}\n"
		out, err := exec.Command(nix, "--parse", "-E", src).CombinedOutput()
		if err != nil {
			t.Errorf("not Nix: %v\n%s\n%s", err, out, src)
		}
	}
}

// TestNixString_evaluatesToItself: a string with Nix's and TOML's special
// characters, quoted for the NixOS lines, evaluates to itself — the
// interpolation "${" stays text.
func TestNixString_evaluatesToItself(t *testing.T) {
	nix, err := exec.LookPath("nix-instantiate")
	if err != nil {
		t.Skip("nix-instantiate not installed")
	}
	for _, s := range []string{`https://lists.example/a"b${x}\c$$`, "tab\there", "plain"} {
		out, err := exec.Command(nix, "--eval", "--json", "-E", nixString(s)).Output()
		var got string
		if err != nil || json.Unmarshal(out, &got) != nil || got != s {
			t.Errorf("%s evaluates to %q (%v), want %q", nixString(s), out, err, s)
		}
	}
}
