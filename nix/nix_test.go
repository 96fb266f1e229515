// Package nix holds the tests that keep the Nix files (module.nix, the
// package, the golden renderings of the module's samples) in step with the
// Go code. Nothing Nix can be built where these run, so they read the .nix
// files as text; nix_parse_test.go is the small reader they share. The Nix
// build does not see this directory (nix/common.nix leaves nix/ out).
package nix

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/config"
)

const (
	moduleFile  = "../module.nix"
	packageFile = "package.nix"
	goldenDir   = "../vmtests/golden"
)

// modelKeys lists every key of the configuration model as "dns.listen" or
// "upstreams[].tls_name", from the toml tags: what the binary accepts.
func modelKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "" || name == "-" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, modelKeys(ft, path)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, modelKeys(ft.Elem(), path+"[]")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// TestModule_typesEveryConfigKey: every key the binary accepts has a typed
// option under services.nxdns.settings, and every typed option is a key the
// binary accepts. A section added to internal/config without its options in
// module.nix fails here (a strict section rejects unknown keys, so without
// them the key cannot be set from Nix at all).
func TestModule_typesEveryConfigKey(t *testing.T) {
	src, err := os.ReadFile(moduleFile)
	if err != nil {
		t.Fatal(err)
	}
	module, err := settingsKeys(string(src))
	if err != nil {
		t.Fatalf("%s: %v", moduleFile, err)
	}
	model := modelKeys(reflect.TypeFor[config.Config](), "")
	if len(model) < 10 || len(module) < 10 {
		t.Fatalf("found %d model keys and %d module options: the readers are broken", len(model), len(module))
	}
	for _, k := range model {
		if !slices.Contains(module, k) {
			t.Errorf("the configuration model has %s, module.nix has no typed option for it", k)
		}
	}
	for _, k := range module {
		if !slices.Contains(model, k) {
			t.Errorf("module.nix types %s, which the configuration model does not have", k)
		}
	}
}

// TestSettingsKeys_readsTheModuleShape: the reader finds nested sections,
// lists of tables and dotted option names, and ignores strings and
// comments, so the test above cannot pass by reading nothing.
func TestSettingsKeys_readsTheModuleShape(t *testing.T) {
	src := `
let
  # a comment with a brace { and settingsModule = {
  aSection = {
    options = {
      one = mkOption { type = types.str; description = "x = { y"; };
      two = optional types.int ''
        multi-line ''${"with"} ${toString 1} { braces
      '';
      inner = section innerSection "nested";
    };
  };
  innerSection = { options.deep = optional types.bool "d"; };
  entry = { options = { url = optional types.str "u"; }; };
  settingsModule = {
    freeformType = format.type;
    options = {
      a = section aSection "A.";
      items = list entry "Items." // { default = [ ]; };
    };
  };
in
{ }
`
	got, err := settingsKeys(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a.inner.deep", "a.one", "a.two", "items[].url"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("settingsKeys = %q, want %q", got, want)
	}
}

// TestModule_defaultUpstreamsAreTheBuiltInPair: what the module writes when
// the user names no upstream (vmtests/golden/minimal.toml, the rendering of
// `services.nxdns.enable = true;`) is the binary's own built-in pair.
func TestModule_defaultUpstreamsAreTheBuiltInPair(t *testing.T) {
	c, err := config.LoadFile(filepath.Join(goldenDir, "minimal.toml"))
	if err != nil {
		t.Fatalf("the minimal configuration does not load: %v", err)
	}
	type ident struct {
		URL, Address string
		Priority     int
	}
	var got, want []ident
	for _, u := range c.Upstreams {
		got = append(got, ident{u.URL, u.Address, u.Priority})
	}
	for _, u := range config.Default().Upstreams {
		want = append(want, ident{u.URL, u.Address, u.Priority})
	}
	if !slices.Equal(got, want) {
		t.Errorf("module.nix's default upstreams %+v, the binary's built-in %+v", got, want)
	}
}

// TestGolden_renderedFromTheCurrentFiles: each golden file's header names
// the SHA-256 of module.nix and its sample; a change to either without
// running vmtests/golden/regenerate.sh fails here, so CI's `nxdns check` on
// the golden files always checks what the module renders now.
func TestGolden_renderedFromTheCurrentFiles(t *testing.T) {
	module, err := os.ReadFile(moduleFile)
	if err != nil {
		t.Fatal(err)
	}
	header := regexp.MustCompile(`(?m)^# inputs-sha256: ([0-9a-f]{64})$`)
	for golden, sample := range map[string]string{"minimal.toml": "nixcheck-minimal.nix", "full.toml": "nixcheck-sample.nix"} {
		g, err := os.ReadFile(filepath.Join(goldenDir, golden))
		if err != nil {
			t.Fatal(err)
		}
		s, err := os.ReadFile(filepath.Join("../vmtests", sample))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(append(slices.Clone(module), s...))
		m := header.FindSubmatch(g)
		if m == nil || string(m[1]) != hex.EncodeToString(sum[:]) {
			t.Errorf("%s was not rendered from the current module.nix and vmtests/%s: run vmtests/golden/regenerate.sh (NIXCHECK_LIB=…) and commit it", golden, sample)
		}
	}
}

// TestPackage_skippedTestsExist: every test nix/package.nix skips in the Nix
// build still exists, so the list cannot go stale and skip nothing (or hide
// a renamed test's successor).
func TestPackage_skippedTestsExist(t *testing.T) {
	src, err := os.ReadFile(packageFile)
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(src), "wallClockTests = [")
	list, _, _ = strings.Cut(list, "];")
	if !ok {
		t.Fatalf("%s has no wallClockTests list", packageFile)
	}
	names := regexp.MustCompile(`"(Test\w+)"`).FindAllStringSubmatch(list, -1)
	if len(names) == 0 {
		t.Fatalf("no names in %s's wallClockTests", packageFile)
	}
	var all strings.Builder
	for _, dir := range []string{"../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
			if err != nil || !strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			all.Write(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names {
		if !strings.Contains(all.String(), "func "+n[1]+"(t *testing.T)") {
			t.Errorf("%s skips %s, which is no test in internal/ or cmd/", packageFile, n[1])
		}
	}
}
