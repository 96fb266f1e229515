package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDNSSEC_defaultsAreShadowWithForwardZonesUnvalidated(t *testing.T) {
	c := mustLoad(t, minimal+"[[forward_zones]]\nzone = \"lan\"\nresolver = \"udp://192.168.1.1:53\"\n")
	if c.DNSSEC.Mode != DNSSECShadow || c.DNSSEC.ClockSkew != 3600 || c.ForwardZones[0].Validates() {
		t.Fatalf("dnssec %+v, zone validates %v: want shadow, 3600 s, zone not validated", c.DNSSEC, c.ForwardZones[0].Validates())
	}
}

func TestDNSSEC_badValuesAreNamedByKey(t *testing.T) {
	ps := loadProblems(t, minimal+"[dnssec]\nmode = \"strict\"\nclock_skew = -1\nnegative_trust_anchors = [\"bad name!\"]\ntrust_anchors_file = \"relative.keys\"\n")
	for _, want := range []string{"dnssec.mode", "dnssec.clock_skew", "dnssec.negative_trust_anchors[0]", "dnssec.trust_anchors_file"} {
		if !strings.Contains(ps.Error(), want) {
			t.Errorf("problems %v do not name %s", ps, want)
		}
	}
}

func TestDNSSEC_trustAnchorsFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.keys")
	os.WriteFile(good, []byte(". DS 20326 8 2 E06D44B80B8F1D39A95C0B0D7C65D08458E880409BBC683457104237C7F8EC8D\n"), 0o600)
	c := mustLoad(t, minimal+"[dnssec]\ntrust_anchors_file = \""+good+"\"\n")
	if len(c.DNSSEC.Anchors) != 1 {
		t.Fatalf("anchors %v, want the file's one DS", c.DNSSEC.Anchors)
	}
	for name, body := range map[string]string{"a.keys": ". IN A 192.0.2.1\n", "empty.keys": "", "junk.keys": ". IN DS nonsense\n"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o600)
		ps := loadProblems(t, minimal+"[dnssec]\ntrust_anchors_file = \""+p+"\"\n")
		if len(ps) != 1 || ps[0].Path != "dnssec.trust_anchors_file" || ps[0].Code != CodeTrustAnchors {
			t.Errorf("%s: problems %v, want a TrustAnchors problem on dnssec.trust_anchors_file", name, ps)
		}
	}
}
