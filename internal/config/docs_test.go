package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const (
	exampleFile   = "../../docs/examples/nxdns.toml"
	referenceFile = "../../docs/reference/configuration.md"
)

// TestExample_isValid: the shipped example loads clean and still shows what
// it promises a household (DoT and DoH upstreams, a LAN zone and its reverse
// zone, static clients, a web listener).
func TestExample_isValid(t *testing.T) {
	c, err := LoadFile(exampleFile)
	if err != nil {
		t.Fatalf("%s:\n%v", exampleFile, err)
	}
	schemes := map[string]bool{}
	for _, u := range c.EnabledUpstreams() {
		scheme, _, _ := strings.Cut(u.URL, "://")
		schemes[scheme] = true
	}
	if !schemes["tls"] || !schemes["https"] {
		t.Errorf("enabled upstream schemes %v, want tls and https", schemes)
	}
	var zones []string
	for _, z := range c.ForwardZones {
		zones = append(zones, z.FQDN())
	}
	for _, want := range []string{"lan.", "168.192.in-addr.arpa."} {
		if !slices.Contains(zones, want) {
			t.Errorf("zones %q lack %q", zones, want)
		}
	}
	if len(c.Clients) == 0 || c.Web.Listen == "" {
		t.Error("the example has no static clients or no web listener")
	}
}

// keyPaths lists every key of the model as the reference writes it:
// "dns.listen", "upstreams[].tls_name".
func keyPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := tomlName(f)
		if name == "" || name == "-" {
			continue
		}
		path := join(prefix, name)
		switch ft := f.Type; {
		case ft.Kind() == reflect.Struct:
			out = append(out, keyPaths(ft, path)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, keyPaths(ft.Elem(), path+"[]")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

func readReference(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(doc)
}

// TestReference_documentsEveryKey: each key has a row in the reference, and
// each row names a key the model has, so a rename fails here.
func TestReference_documentsEveryKey(t *testing.T) {
	doc := readReference(t)
	keys := keyPaths(reflect.TypeFor[Config](), "")
	if len(keys) < 20 {
		t.Fatalf("keyPaths found only %d keys: %q", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.Contains(doc, "| `"+k+"` |") {
			t.Errorf("%s has no row in %s", k, referenceFile)
		}
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+(?:\\[\\])?\\.[a-z_]+)` \\|")
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		if !slices.Contains(keys, m[1]) {
			t.Errorf("%s documents %s, which the model does not have", referenceFile, m[1])
		}
	}
}

// codes reads this package's source for every exported Code constant, so a
// code added without documentation or a fixture fails below.
func codes(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{} // constant name → value
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
					continue
				}
				for i, name := range vs.Names {
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s is not a string literal", name.Name)
					}
					v, _ := strconv.Unquote(lit.Value)
					out[name.Name] = v
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("found only %d Code constants", len(out))
	}
	return out
}

func TestCodes_valueIsName(t *testing.T) {
	for name, value := range codes(t) {
		if "Code"+value != name {
			t.Errorf("%s = %q, want %q: a code reads the same in Go and in the docs", name, value, strings.TrimPrefix(name, "Code"))
		}
	}
}

func TestReference_documentsEveryCode(t *testing.T) {
	doc := readReference(t)
	for name, value := range codes(t) {
		if !strings.Contains(doc, "| `"+value+"` |") {
			t.Errorf("%s (%q) has no row in the problem codes of %s", name, value, referenceFile)
		}
	}
}

// TestCodes_eachHasAFixture: every rule is exercised by a file in
// testdata/bad, except those whose fixture would be unwieldy and that a Go
// test covers instead.
func TestCodes_eachHasAFixture(t *testing.T) {
	goTested := map[string]string{
		"TooManyUpstreams": "TestValidate_upstreamBound (65 upstreams)",
		// Warnings never fail Load, so a bad fixture cannot hold them.
		"StandbyWithoutAttempt": "TestWarnings_budgetInequalities",
		"BudgetOutlastsClients": "TestWarnings_budgetInequalities",
		// Found by reading what the file names (app.Preflight), not by Load.
		"InvalidRule":  "cmd/nxdns TestCheck_failsWhatTheDaemonRejectsOrIgnores",
		"PasswordFile": "cmd/nxdns TestCheck_failsWhatTheDaemonRejectsOrIgnores",
		"Certificate":  "cmd/nxdns TestCheck_failsWhatTheDaemonRejectsOrIgnores",
	}
	files, err := filepath.Glob("testdata/bad/*.toml")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	for _, value := range codes(t) {
		if _, ok := goTested[value]; ok {
			continue
		}
		if !regexp.MustCompile(`(?m)^# want: \S+ ` + value + `$`).MatchString(all.String()) {
			t.Errorf("no fixture in testdata/bad wants %s", value)
		}
	}
}
