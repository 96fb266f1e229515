package filter

import (
	"strings"
	"testing"
)

// build makes a set of lists given as text; list i gets bit i, and allow
// says which lists are allowlists.
func build(t testing.TB, allow map[int]bool, lists ...string) *Set {
	t.Helper()
	b := NewBuilder(0)
	for i, text := range lists {
		if _, err := Parse(strings.NewReader(text), func(r Rule) { b.Add(i, allow[i], r) }); err != nil {
			t.Fatal(err)
		}
	}
	return b.Build()
}

const all = ^uint64(0)

func expect(t *testing.T, s *Set, name string, mask uint64, blocked bool, rule string) {
	t.Helper()
	v := s.decide(name, mask)
	if v.blocked != blocked {
		t.Errorf("%s: blocked %v, want %v (rule %q)", name, v.blocked, blocked, v.why.ruleText())
		return
	}
	if rule != "" && v.why.ruleText() != rule {
		t.Errorf("%s: rule %q, want %q", name, v.why.ruleText(), rule)
	}
}

func TestSet_matchingKinds(t *testing.T) {
	s := build(t, nil, "exact.example\n||sub.example^\n*.wild.example\n/^ad[0-9]+\\.example$/\n")
	expect(t, s, "exact.example", all, true, "exact.example")
	expect(t, s, "a.exact.example", all, false, "") // hosts/plain entries are exact
	expect(t, s, "sub.example", all, true, "||sub.example^")
	expect(t, s, "x.y.sub.example", all, true, "||sub.example^")
	expect(t, s, "notsub.example", all, false, "")
	expect(t, s, "wild.example", all, false, "") // *.name: subdomains only
	expect(t, s, "a.wild.example", all, true, "*.wild.example")
	expect(t, s, "ad42.example", all, true, `/^ad[0-9]+\.example$/`)
	expect(t, s, "example", all, false, "")
	expect(t, s, "other.org", all, false, "")
}

func TestSet_allowBeatsBlock(t *testing.T) {
	s := build(t, map[int]bool{1: true},
		"||ads.example^\n||imp.example^$important\n@@||ok.ads.example^\n@@||ok.imp.example^\n",
		"keep.ads.example\nok.imp.example\n/^re\\.ads\\.example$/\n")
	expect(t, s, "x.ads.example", all, true, "||ads.example^")
	expect(t, s, "ok.ads.example", all, false, "@@||ok.ads.example^") // @@ exception
	expect(t, s, "deep.ok.ads.example", all, false, "")
	expect(t, s, "keep.ads.example", all, false, "keep.ads.example")   // allowlist entry
	expect(t, s, "re.ads.example", all, false, `/^re\.ads\.example$/`) // allowlist regex
	// $important beats an @@ exception, never an allowlist.
	expect(t, s, "a.ok.imp.example", all, true, "||imp.example^$important")
	expect(t, s, "ok.imp.example", all, false, "ok.imp.example")
	// Without the allowlist in the client's lists, the block stands.
	expect(t, s, "keep.ads.example", 1, true, "||ads.example^")
}

func TestSet_masksSelectLists(t *testing.T) {
	s := build(t, nil, "one.example\n", "two.example\nboth.example\n", "both.example\n")
	expect(t, s, "one.example", 1<<0, true, "")
	expect(t, s, "one.example", 1<<1, false, "")
	expect(t, s, "two.example", 1<<1, true, "")
	if v := s.decide("both.example", 1<<2); !v.blocked || v.why.list != 2 {
		t.Errorf("both.example for list 2: %+v", v)
	}
	if v := s.decide("both.example", all); v.why.list != 1 {
		t.Errorf("both.example for all lists: list %d, want the first (1)", v.why.list)
	}
	// One name, two kinds in two lists: the exact rule of list 0 does not
	// reach a subdomain through list 1's subtree rule.
	s = build(t, nil, "mixed.example\n", "||mixed.example^\n")
	expect(t, s, "a.mixed.example", 1<<0, false, "")
	expect(t, s, "a.mixed.example", 1<<1, true, "||mixed.example^")
}

func TestSet_duplicatesCollapse(t *testing.T) {
	s := build(t, nil, strings.Repeat("dup.example\n", 1000)+"other.example\n", "dup.example\n")
	if s.Names() != 2 {
		t.Errorf("%d names, want 2", s.Names())
	}
}

func TestSet_empty(t *testing.T) {
	s := NewBuilder(0).Build()
	expect(t, s, "anything.example", all, false, "")
}

func TestSet_idnComparedInASCII(t *testing.T) {
	s := build(t, nil, "BÜCHER.example\n||Straße.example^\n")
	expect(t, s, "xn--bcher-kva.example", all, true, "xn--bcher-kva.example")
	// Non-transitional UTS 46, as current browsers resolve it: ß stays ß.
	expect(t, s, "www.xn--strae-oqa.example", all, true, "||xn--strae-oqa.example^")
	expect(t, s, "www.strasse.example", all, false, "")
}
