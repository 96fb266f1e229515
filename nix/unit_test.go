package nix

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// unit is vmtests/golden/unit-NAME.json: the systemd unit module.nix makes
// of a sample, as nixcheck rendered it (vmtests/golden/regenerate.sh).
type unit struct {
	InputsSHA256  string         `json:"_inputs_sha256"`
	ServiceConfig map[string]any `json:"serviceConfig"`
	UnitConfig    map[string]any `json:"unitConfig"`
}

func readUnit(t *testing.T, name, sample string) (unit, map[string]any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, "unit-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var u unit
	var all map[string]any
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	module, err := os.ReadFile(moduleFile)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.ReadFile(filepath.Join("../vmtests", sample))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(slices.Clone(module), s...))
	if u.InputsSHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("unit-%s.json was not rendered from the current module.nix and vmtests/%s: run vmtests/golden/regenerate.sh", name, sample)
	}
	delete(all, "_inputs_sha256")
	return u, all
}

// optionDriven is what the full sample's unit may have beyond the minimal
// one, and must have: module options, not settings, that change the unit
// (and so restart nxdns, which they need: systemd applies a group or a
// credential only at start). services.nxdns.tls.acmeHost adds the
// certificate's unit and group, services.nxdns.web.passwordFile the
// credential.
var optionDriven = struct {
	wants, after []string
	service      map[string]any
}{
	wants: []string{"acme-dns.home.example.org.service"},
	after: []string{"acme-dns.home.example.org.service"},
	service: map[string]any{
		"SupplementaryGroups": []any{"acme"},
		"LoadCredential":      []any{"web-password:/run/secrets/nxdns-web-password"},
	},
}

// TestUnit_doesNotDependOnSettings: the smallest configuration and the full
// sample (other budgets, listeners, sections) give the same unit, but for
// optionDriven. A unit computed from settings (TimeoutStopSec from the
// budgets, say) changes with them, and `nixos-rebuild switch` then restarts
// nxdns instead of reloading it (the file is read through /etc, so
// ExecStart stays the same).
func TestUnit_doesNotDependOnSettings(t *testing.T) {
	_, minimal := readUnit(t, "minimal", "nixcheck-minimal.nix")
	_, full := readUnit(t, "full", "nixcheck-sample.nix")
	for key, extra := range map[string][]string{"wants": optionDriven.wants, "after": optionDriven.after} {
		list, _ := full[key].([]any)
		for _, e := range extra {
			i := slices.Index(list, any(e))
			if i < 0 {
				t.Errorf("%s %v lacks %s (services.nxdns.tls.acmeHost)", key, list, e)
				continue
			}
			list = slices.Delete(slices.Clone(list), i, i+1)
		}
		full[key] = list
	}
	sc, _ := full["serviceConfig"].(map[string]any)
	for k, want := range optionDriven.service {
		if !reflect.DeepEqual(sc[k], want) {
			t.Errorf("serviceConfig.%s = %v with the full sample, want %v (set by a services.nxdns option)", k, sc[k], want)
		}
		delete(sc, k)
	}
	for _, k := range slices.Sorted(maps.Keys(full)) {
		if !reflect.DeepEqual(full[k], minimal[k]) {
			t.Errorf("%s differs with the settings:\n minimal: %v\n full:    %v", k, minimal[k], full[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sc)) {
		if m, _ := minimal["serviceConfig"].(map[string]any); !reflect.DeepEqual(sc[k], m[k]) {
			t.Errorf("serviceConfig.%s: %v with the full sample, %v with the minimal one", k, sc[k], m[k])
		}
	}
}

// TestUnit_lifecycle: the unit of docs/design.md#nixos-module. Reload waits for nxdns's outcome
// and fails when nxdns rejected it (issue 30 finding 3: ExecReload checks
// the file with what it names, then `nxdns reload` signals and waits for the
// status file in RuntimeDirectory; Type=notify-reload cannot report a
// failed reload); a DNS server never ends up failed (no start limit, restart after
// every exit with a growing delay); /proc/stat stays visible for
// process_start_time_seconds (no ProcSubset=pid); netlink for interfaces.
func TestUnit_lifecycle(t *testing.T) {
	u, _ := readUnit(t, "minimal", "nixcheck-minimal.nix")
	sc := u.ServiceConfig
	want := map[string]any{
		"Type":           "notify",
		"NotifyAccess":   "main",
		"Restart":        "always",
		"DynamicUser":    true,
		"StateDirectory": []any{"nxdns", "nxdns/lists"}, // lists: nxdns does not create filter.state_dir
		"WatchdogSec":    "30s",
	}
	for k, v := range want {
		if !reflect.DeepEqual(sc[k], v) {
			t.Errorf("serviceConfig.%s = %v, want %v", k, sc[k], v)
		}
	}
	reload, _ := sc["ExecReload"].([]any)
	if len(reload) != 2 || !strings.Contains(fmt.Sprint(reload[0]), `"check" "--files"`) ||
		!strings.Contains(fmt.Sprint(reload[1]), "reload --pid $MAINPID --status /run/nxdns/reload-status") {
		t.Errorf("serviceConfig.ExecReload = %v, want check --files, then nxdns reload waiting on /run/nxdns/reload-status", reload)
	}
	if !strings.Contains(fmt.Sprint(sc["ExecStart"]), `"--reload-status" "/run/nxdns/reload-status"`) || sc["RuntimeDirectory"] != "nxdns" {
		t.Errorf("ExecStart %v, RuntimeDirectory %v: nxdns must write the status file nxdns reload reads", sc["ExecStart"], sc["RuntimeDirectory"])
	}
	for _, k := range []string{"ProcSubset"} {
		if v, ok := sc[k]; ok {
			t.Errorf("serviceConfig.%s = %v, want it unset", k, v)
		}
	}
	if steps, _ := sc["RestartSteps"].(float64); steps < 1 || sc["RestartMaxDelaySec"] == nil {
		t.Errorf("RestartSteps %v, RestartMaxDelaySec %v: want a growing restart delay", sc["RestartSteps"], sc["RestartMaxDelaySec"])
	}
	if v, ok := u.UnitConfig["StartLimitIntervalSec"].(float64); !ok || v != 0 {
		t.Errorf("unitConfig.StartLimitIntervalSec = %v, want 0 (no start limit)", u.UnitConfig["StartLimitIntervalSec"])
	}
	families, _ := sc["RestrictAddressFamilies"].([]any)
	for _, f := range []string{"AF_INET", "AF_INET6", "AF_UNIX", "AF_NETLINK"} {
		if !slices.Contains(families, any(f)) {
			t.Errorf("RestrictAddressFamilies %v lacks %s", families, f)
		}
	}
	// nxdns drains for at most its longest budget (120 000 ms at most) plus
	// a second; systemd must not kill it before.
	if sc["TimeoutStopSec"] != "130s" {
		t.Errorf("TimeoutStopSec = %v, want the fixed 130s", sc["TimeoutStopSec"])
	}
}
