package nix

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestFlake_piIsATemplate: `nix flake check` evaluates every
// nixosConfigurations output, and a Pi system without an SSH key fails its
// assertion (nix/pi.nix), so the Pi system must not be an output of this
// flake; it is the `pi` template, whose configuration.nix takes the key
// (docs/nix.md, docs/how-to/deploy-on-a-pi.md). .ci/nix-check.sh evaluates
// the template itself; this keeps the shape in step without nixpkgs' lib.
func TestFlake_piIsATemplate(t *testing.T) {
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return blank(string(b)) // strings and comments blanked
	}
	raw := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	flake := read("../flake.nix")
	if strings.Contains(flake, "nixosConfigurations") {
		t.Error("flake.nix has a nixosConfigurations output: without a key it fails `nix flake check` as cloned")
	}
	if !regexp.MustCompile(`templates\.pi\s*=`).MatchString(flake) {
		t.Error("flake.nix has no templates.pi")
	}
	if _, err := os.Stat("../nix/pi-authorized-keys"); err == nil {
		t.Error("nix/pi-authorized-keys is back: keys belong in the template's configuration.nix")
	}
	tf := read("../templates/pi/flake.nix")
	for _, want := range []string{"nxdns.nixosModules.pi", "./configuration.nix", "nixosConfigurations.pi"} {
		if !strings.Contains(tf, want) {
			t.Errorf("templates/pi/flake.nix does not use %s", want)
		}
	}
	// The template pins the nixpkgs branch this flake is tested against.
	url := regexp.MustCompile(`inputs\.nixpkgs\.url\s*=\s*"([^"]+)"`)
	root, tpl := url.FindStringSubmatch(raw("../flake.nix")), url.FindStringSubmatch(raw("../templates/pi/flake.nix"))
	if root == nil || tpl == nil || root[1] != tpl[1] {
		t.Errorf("nixpkgs of the template %v, of the flake %v: want the same branch", tpl, root)
	}
	// The key line .ci/nix-check.sh fills in (the how-to's step 1).
	if !strings.Contains(raw("../templates/pi/configuration.nix"), "\n  users.users.root.openssh.authorizedKeys.keys = [\n") {
		t.Error("templates/pi/configuration.nix: the authorizedKeys list .ci/nix-check.sh fills is not where it looks")
	}
}
