package filter

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func parseAll(t *testing.T, text string) ([]Rule, Report) {
	t.Helper()
	var rules []Rule
	rep, err := Parse(strings.NewReader(text), func(r Rule) { rules = append(rules, r) })
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return rules, rep
}

// TestParse_everyFormatMixedInOneFile: the formats of docs/design.md#filter-formats in one list.
func TestParse_everyFormatMixedInOneFile(t *testing.T) {
	text := "\ufeff# a hosts file, an adblock list and plain names in one\r\n" +
		"! adblock comment\r\n" +
		"[Adblock Plus 2.0]\n" +
		"\n" +
		"0.0.0.0 ads.example\r\n" +
		"127.0.0.1 Tracker.Example.  # comment after\n" +
		":: six.example\n" +
		"0.0.0.0 a.example b.example\n" +
		"plain.example\n" +
		"TRAILING.example.\n" +
		"||sub.example^\n" +
		"||imp.example^$important\n" +
		"@@||ok.sub.example^\n" +
		"*.wild.example\n" +
		"/^ad[0-9]+\\./\n" +
		"bücher.example\n" +
		"example.com##.banner\n" +
		"||third.example^$third-party\n" +
		"127.0.0.1 localhost\n" +
		"0.0.0.0 0.0.0.0\n" +
		"this is not a rule\n" +
		"bad..name.example\n" +
		"||x.example^/path\n"
	rules, rep := parseAll(t, text)
	want := []Rule{
		{Name: "ads.example", Kind: Exact},
		{Name: "tracker.example", Kind: Exact},
		{Name: "six.example", Kind: Exact},
		{Name: "a.example", Kind: Exact},
		{Name: "b.example", Kind: Exact},
		{Name: "plain.example", Kind: Exact},
		{Name: "trailing.example", Kind: Exact},
		{Name: "sub.example", Kind: Subtree},
		{Name: "imp.example", Kind: Subtree, Important: true},
		{Name: "ok.sub.example", Kind: Subtree, Exception: true},
		{Name: "wild.example", Kind: Wildcard},
		{Kind: Regex, Text: `/^ad[0-9]+\./`},
		{Name: "xn--bcher-kva.example", Kind: Exact},
	}
	if len(rules) != len(want) {
		t.Fatalf("%d rules, want %d: %+v", len(rules), len(want), rules)
	}
	for i, w := range want {
		got := rules[i]
		got.Re = nil
		if got != w {
			t.Errorf("rule %d = %+v, want %+v", i, got, w)
		}
	}
	if rep.Rules != 13 || rep.Taken != 12 {
		t.Errorf("rules %d, taken %d; want 13 rules from 12 lines", rep.Rules, rep.Taken)
	}
	wantIgnored := map[Reason]int{ReasonCosmetic: 1, ReasonModifier: 1, ReasonInvalidName: 3, ReasonURL: 1}
	for r, n := range wantIgnored {
		if rep.Ignored[r] != n {
			t.Errorf("ignored %q = %d, want %d (all: %v)", r, rep.Ignored[r], n, rep.Ignored)
		}
	}
	if rep.Rejected != 1 {
		t.Errorf("rejected %d, want 1 (the sentence)", rep.Rejected)
	}
}

func TestParse_regexBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("/" + strings.Repeat("a", MaxRegexLen+1) + "/\n")
	b.WriteString("/(unclosed/\n")
	for i := range 100_000 {
		b.WriteString("/^r" + strings.Repeat("x", i%7) + "[0-9]+$/\n")
	}
	start := time.Now()
	rules, rep := parseAll(t, b.String())
	if len(rules) != MaxRegexes {
		t.Errorf("%d regexes taken, want the cap %d", len(rules), MaxRegexes)
	}
	if rep.Ignored[ReasonLongRegex] != 1 || rep.Ignored[ReasonManyRegexes] != 100_000-MaxRegexes || rep.Rejected != 1 {
		t.Errorf("report %+v", rep)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("100 000 regex lines took %v", d)
	}
}

func TestParse_rejectsWholeLists(t *testing.T) {
	defer func(c int64) { listCap = c }(listCap)
	listCap = 1 << 20
	for _, tc := range []struct {
		name string
		body []byte
		want error
	}{
		{"binary", []byte("ads.example\n\x00\x01\x02\x03\n"), ErrBinary},
		{"html", []byte("  <!DOCTYPE html>\n<html><body>captive portal</body></html>\n"), ErrHTML},
		{"html after a BOM", []byte("\ufeff<html>\n"), ErrHTML},
		{"gigantic", bytes.Repeat([]byte("0.0.0.0 a.example\n"), (1<<20)/18+10), ErrTooBig},
	} {
		_, err := Parse(bytes.NewReader(tc.body), func(Rule) {})
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestParse_megabyteLineIsRejectedAndSkipped(t *testing.T) {
	text := "first.example\n" + strings.Repeat("x", 1<<20) + "\nlast.example\n"
	rules, rep := parseAll(t, text)
	if len(rules) != 2 || rules[1].Name != "last.example" || rep.Rejected != 1 {
		t.Errorf("rules %+v report %+v: want both names and one rejected line", rules, rep)
	}
}

func TestParse_emptyList(t *testing.T) {
	rules, rep := parseAll(t, "")
	if len(rules) != 0 || rep.Taken != 0 || rep.Rejected != 0 {
		t.Errorf("empty: %v %+v", rules, rep)
	}
	rules, _ = parseAll(t, "# only comments\n\n\n")
	if len(rules) != 0 {
		t.Errorf("comments: %v", rules)
	}
}

func TestParse_noFinalNewline(t *testing.T) {
	rules, _ := parseAll(t, "a.example\r\nb.example")
	if len(rules) != 2 || rules[1].Name != "b.example" {
		t.Errorf("rules %+v", rules)
	}
}

func TestParseLine_inline(t *testing.T) {
	var got []Rule
	rep := ParseLine("@@||Allowed.Example.^", func(r Rule) { got = append(got, r) })
	if rep.Taken != 1 || len(got) != 1 || got[0].Name != "allowed.example" || !got[0].Exception || got[0].Kind != Subtree {
		t.Errorf("%+v %+v", got, rep)
	}
}
