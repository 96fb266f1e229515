package filter

import (
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary list bodies to the parser and the set: no input
// panics, every rule it emits has a valid name (or a compiled regex), and
// every exact or subtree rule it takes then matches its own name.
func FuzzParse(f *testing.F) {
	f.Add("0.0.0.0 ads.example\n||t.example^$important\n@@||ok.t.example^\n*.w.example\n/^a[0-9]+$/\n")
	f.Add("\ufeff# c\r\nbücher.example.\r\n:: x.example y.example # z\n")
	f.Add("example.com##.ad\n||a.example^$third-party\n|https://x/\n<html>")
	f.Add("0.0.0.0 localhost\n127.0.0.1 0.0.0.0\nfe80::1%lo0 ip6-localhost\n")
	f.Fuzz(func(t *testing.T, body string) {
		b := NewBuilder(0)
		var rules []Rule
		_, err := Parse(strings.NewReader(body), func(r Rule) {
			rules = append(rules, r)
			b.Add(0, false, r)
		})
		if err != nil {
			return
		}
		s := b.Build()
		exceptions := false
		for _, r := range rules {
			exceptions = exceptions || r.Exception
		}
		for _, r := range rules {
			if r.Kind == Regex {
				if r.Re == nil {
					t.Fatalf("regex rule %q without a compiled regex", r.Text)
				}
				continue
			}
			if !validName(r.Name) {
				t.Fatalf("rule name %q is not a valid name", r.Name)
			}
			// Without exceptions (which may cover it), a rule blocks its own name.
			if (r.Kind == Exact || r.Kind == Subtree) && !exceptions && !s.decide(r.Name, all).blocked {
				t.Fatalf("rule %+v does not block its own name", r)
			}
		}
	})
}
