package nix

import (
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/config"
)

// TestModule_describedDefaultsAreTheBinarys: an option left null takes
// nxdns's own default, and its description names it ("(default 2000)").
// That value must be config.Default()'s, so a default changed in the binary
// (the budgets, say) cannot leave the module's documentation behind.
func TestModule_describedDefaultsAreTheBinarys(t *testing.T) {
	src, err := os.ReadFile(moduleFile)
	if err != nil {
		t.Fatal(err)
	}
	described := describedDefaults(string(src))
	if len(described) < 15 {
		t.Fatalf("found %d described defaults in %s: the reader is broken", len(described), moduleFile)
	}
	def := reflect.ValueOf(config.Default())
	for key, want := range described {
		v, ok := fieldByKey(def, key)
		if !ok {
			t.Errorf("module.nix describes a default for %s, which the configuration model does not have", key)
			continue
		}
		got, ok := defaultText(v)
		if !ok {
			t.Errorf("%s: a %s cannot be compared with the described %q", key, v.Type(), want)
			continue
		}
		if got != want {
			t.Errorf("module.nix describes %s's default as %s, the binary's is %s", key, want, got)
		}
	}
}

var (
	sectionLine  = regexp.MustCompile(`^\s+(\w+) = section (\w+) `)
	bindingStart = regexp.MustCompile(`^  (\w+) = \{$`)
	optionStart  = regexp.MustCompile(`^\s+(\w+) = optional `)
	defaultWord  = regexp.MustCompile(`\(default ([^;,)]+)`)
)

// describedDefaults reads, for each `KEY = optional TYPE "… (default X) …";`
// option of a section (`NAME = section VAR "…"` in settingsModule), the X of
// its description: "upstream.attempt_timeout_ms" → "2000". Options of list
// entries (upstreams, filter.lists …) have no default in config.Default and
// are left out.
func describedDefaults(src string) map[string]string {
	lines := strings.Split(src, "\n")
	prefix := map[string]string{} // section variable → TOML section
	for _, l := range lines {
		if m := sectionLine.FindStringSubmatch(l); m != nil {
			prefix[m[2]] = m[1]
		}
	}
	out := map[string]string{}
	binding := ""
	for i := 0; i < len(lines); i++ {
		if m := bindingStart.FindStringSubmatch(lines[i]); m != nil {
			binding = m[1]
			continue
		}
		m := optionStart.FindStringSubmatch(lines[i])
		section, ok := prefix[binding]
		if m == nil || !ok {
			continue
		}
		// The option's statement runs to the line that ends it.
		text := lines[i]
		for !strings.HasSuffix(strings.TrimSpace(lines[i]), ";") && i+1 < len(lines) {
			i++
			text += " " + lines[i]
		}
		if d := defaultWord.FindStringSubmatch(text); d != nil {
			out[section+"."+m[1]] = strings.TrimSpace(d[1])
		}
	}
	return out
}

// fieldByKey finds "section.key" in a configuration value by toml tags.
func fieldByKey(v reflect.Value, key string) (reflect.Value, bool) {
	for name := range strings.SplitSeq(key, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		found := false
		for i := range v.NumField() {
			tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ",")
			if tag == name {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
	}
	return v, true
}

// defaultText writes a default as a description names it. A *bool is the
// model's "absent means true" (Enabled, Queries, Prefetch, BypassGuards):
// Default leaves it nil.
func defaultText(v reflect.Value) (string, bool) {
	switch {
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		return strconv.FormatInt(v.Int(), 10), true
	case v.Kind() == reflect.Bool:
		return strconv.FormatBool(v.Bool()), true
	case v.Kind() == reflect.String:
		return v.String(), true
	case v.Kind() == reflect.Pointer && v.Type().Elem().Kind() == reflect.Bool:
		return strconv.FormatBool(v.IsNil() || v.Elem().Bool()), true
	}
	return "", false
}
