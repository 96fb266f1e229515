// Package packaging holds the files that install nxdns outside Nix (the
// systemd unit, the .deb's configuration and scripts) and the test that
// keeps the unit's hardening the same as the NixOS module's.
package packaging

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// moduleUnit is the unit module.nix renders for `services.nxdns.enable =
// true;`, committed by vmtests/golden/regenerate.sh and checked against
// module.nix by nix/. The minimal one: the full sample's unit is the same
// plus what NixOS-only options add (an ACME certificate's group, the
// password credential; nix/unit_test.go's optionDriven), which a .deb has
// no equivalent for.
const moduleUnit = "../vmtests/golden/unit-minimal.json"

// differ are the [Service] keys allowed to differ from the module's, each
// for a reason: Debian 12's systemd is 252.
var differ = map[string]string{
	"Type":                 "notify-reload needs systemd 253; the .deb's unit checks the file, then sends SIGHUP",
	"ExecStart":            "/usr/bin/nxdns instead of a store path",
	"ExecReload":           "notify-reload has none; the .deb's checks the file, then nxdns reload waits for the outcome",
	"RuntimeDirectory":     "the reload status file nxdns reload reads; notify-reload needs none",
	"RuntimeDirectoryMode": "as RuntimeDirectory",
	"RestartSec":           "no RestartSteps before systemd 254: a fixed 2 s instead of 1 s growing to a minute",
	"RestartSteps":         "systemd 254",
	"RestartMaxDelaySec":   "systemd 254",
	"User":                 "_nxdns: the .deb's static group nxdns would clash with a dynamic user named after the unit (systemd refuses it)",
	"SupplementaryGroups":  "the .deb's group nxdns, so the dynamic user reads a password file chgrp'd to it; the module passes the file as a credential (LoadCredential)",
}

// TestUnit_sameHardeningAsModule: every [Service] key of the module's unit
// has the same value in packaging/nxdns.service, and the other way round,
// but for the keys in differ; the start limit is off in both.
func TestUnit_sameHardeningAsModule(t *testing.T) {
	b, err := os.ReadFile(moduleUnit)
	if err != nil {
		t.Fatal(err)
	}
	var mod struct {
		ServiceConfig map[string]any `json:"serviceConfig"`
		UnitConfig    map[string]any `json:"unitConfig"`
	}
	if err := json.Unmarshal(b, &mod); err != nil {
		t.Fatal(err)
	}
	sections := readUnit(t, "nxdns.service")
	svc := sections["Service"]
	for key, v := range mod.ServiceConfig {
		if _, ok := differ[key]; ok {
			continue
		}
		want := normalize(v)
		if got, ok := svc[key]; !ok || !slices.Equal(got, want) {
			t.Errorf("%s = %q in packaging/nxdns.service, %q in module.nix", key, got, want)
		}
	}
	for key := range svc {
		if _, ok := differ[key]; ok {
			continue
		}
		if _, ok := mod.ServiceConfig[key]; !ok {
			t.Errorf("%s is set in packaging/nxdns.service but not by module.nix", key)
		}
	}
	if got, want := sections["Unit"]["StartLimitIntervalSec"], normalize(mod.UnitConfig["StartLimitIntervalSec"]); !slices.Equal(got, want) {
		t.Errorf("StartLimitIntervalSec = %q, module %q: a DNS server never stops restarting", got, want)
	}
}

// readUnit parses a unit file: section → key → values. Repeated keys and
// space-separated lists accumulate, as systemd reads them; yes/no become
// true/false, as Nix writes them.
func readUnit(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not key=value: %q", path, line)
			}
			if k == "ExecStart" || k == "ExecReload" {
				out[section][k] = append(out[section][k], v)
				continue
			}
			for word := range strings.FieldsSeq(v) {
				switch word {
				case "yes":
					word = "true"
				case "no":
					word = "false"
				}
				out[section][k] = append(out[section][k], word)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// normalize turns a JSON value of the rendered unit into the unit file's
// words.
func normalize(v any) []string {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, e := range v {
			out = append(out, normalize(e)...)
		}
		return out
	case nil:
		return nil
	default:
		return []string{fmt.Sprint(v)}
	}
}
