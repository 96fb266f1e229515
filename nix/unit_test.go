package nix

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// TestUnit_doesNotDependOnSettings: the smallest configuration and the full
// sample (other budgets, listeners, sections) give the same unit. A unit
// computed from settings (TimeoutStopSec from the budgets, say) changes with
// them, and `nixos-rebuild switch` then restarts nxdns instead of reloading
// it (the file is read through /etc, so ExecStart stays the same).
func TestUnit_doesNotDependOnSettings(t *testing.T) {
	_, minimal := readUnit(t, "minimal", "nixcheck-minimal.nix")
	_, full := readUnit(t, "full", "nixcheck-sample.nix")
	for _, k := range slices.Sorted(maps.Keys(full)) {
		if !reflect.DeepEqual(full[k], minimal[k]) {
			t.Errorf("%s differs with the settings:\n minimal: %v\n full:    %v", k, minimal[k], full[k])
		}
	}
	sc, _ := full["serviceConfig"].(map[string]any)
	for _, k := range slices.Sorted(maps.Keys(sc)) {
		if m, _ := minimal["serviceConfig"].(map[string]any); !reflect.DeepEqual(sc[k], m[k]) {
			t.Errorf("serviceConfig.%s: %v with the full sample, %v with the minimal one", k, sc[k], m[k])
		}
	}
}

// TestUnit_lifecycle: SPEC §10's unit. Reload waits for nxdns
// (Type=notify-reload, systemd's own SIGHUP, no ExecReload that returns at
// once); a DNS server never ends up failed (no start limit, restart after
// every exit with a growing delay); /proc/stat stays visible for
// process_start_time_seconds (no ProcSubset=pid); netlink for interfaces.
func TestUnit_lifecycle(t *testing.T) {
	u, _ := readUnit(t, "minimal", "nixcheck-minimal.nix")
	sc := u.ServiceConfig
	want := map[string]any{
		"Type":           "notify-reload",
		"NotifyAccess":   "main",
		"Restart":        "always",
		"DynamicUser":    true,
		"StateDirectory": "nxdns",
		"WatchdogSec":    "30s",
	}
	for k, v := range want {
		if !reflect.DeepEqual(sc[k], v) {
			t.Errorf("serviceConfig.%s = %v, want %v", k, sc[k], v)
		}
	}
	for _, k := range []string{"ExecReload", "ProcSubset"} {
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
