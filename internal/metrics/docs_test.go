package metrics

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

const referenceFile = "../../docs/reference/metrics.md"

// docEntry is one series as docs/reference/metrics.md describes it: a
// "### `name`" heading followed by "Type; labels `a`, `b`." (or "no labels").
type docEntry struct {
	typ    string
	labels []string
}

var (
	headingRE  = regexp.MustCompile("^### `([a-z_]+)`$")
	backtickRE = regexp.MustCompile("`([a-z_]+)`")
)

func readReference(t *testing.T) (entries map[string]docEntry, text string) {
	t.Helper()
	b, err := os.ReadFile(referenceFile)
	if err != nil {
		t.Fatal(err)
	}
	text = string(b)
	entries = map[string]docEntry{}
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if i+2 >= len(lines) {
			t.Fatalf("%s: heading %s has no description", referenceFile, m[1])
		}
		// The first sentence after the heading: "Counter; labels `index`, `url`."
		first, _, _ := strings.Cut(lines[i+2]+" "+lines[i+3], ". ")
		typ, labels, ok := strings.Cut(first, ";")
		if !ok {
			t.Errorf("%s: %s: first sentence %q is not \"Type; labels ...\"", referenceFile, m[1], first)
			continue
		}
		typ, _, _ = strings.Cut(typ, " ") // "Gauge (0 or 1)"
		e := docEntry{typ: strings.ToLower(typ)}
		for _, l := range backtickRE.FindAllStringSubmatch(labels, -1) {
			e.labels = append(e.labels, l[1])
		}
		slices.Sort(e.labels)
		entries[m[1]] = e
	}
	return entries, text
}

// TestReference_listsEverySeries: every family a scrape of non-empty
// snapshots returns is documented with its type and labels, and every
// documented nxdns series exists, so docs/reference/metrics.md cannot drift
// from the code in either direction.
func TestReference_listsEverySeries(t *testing.T) {
	entries, text := readReference(t)
	fams := gatherFrom(t, New(sampleSources()))
	for name, mf := range fams {
		if !strings.HasPrefix(name, "nxdns_") {
			prefix, _, _ := strings.Cut(name, "_")
			if !strings.Contains(text, "`"+prefix+"_*`") {
				t.Errorf("%s: %s is not covered by a `%s_*` mention", referenceFile, name, prefix)
			}
			continue
		}
		e, ok := entries[name]
		if !ok {
			t.Errorf("%s: no \"### `%s`\" section", referenceFile, name)
			continue
		}
		if want := strings.ToLower(mf.GetType().String()); e.typ != want {
			t.Errorf("%s: %s documented as %s, registered as %s", referenceFile, name, e.typ, want)
		}
		if want := labelNames(mf); !slices.Equal(e.labels, want) {
			t.Errorf("%s: %s documented with labels %v, registered with %v", referenceFile, name, e.labels, want)
		}
	}
	for name := range entries {
		if _, ok := fams[name]; !ok {
			t.Errorf("%s documents %s, which nxdns does not export", referenceFile, name)
		}
	}
}

func labelNames(mf *dto.MetricFamily) []string {
	var names []string
	if ms := mf.GetMetric(); len(ms) > 0 {
		for _, lp := range ms[0].GetLabel() {
			names = append(names, lp.GetName())
		}
	}
	slices.Sort(names)
	return names
}

// TestDocs_nameOnlyRealSeries: every nxdns series a document mentions (in
// prose, PromQL or alert rules) is one nxdns exports, so a renamed series
// cannot leave a dead query in the operator's guide.
func TestDocs_nameOnlyRealSeries(t *testing.T) {
	fams := gatherFrom(t, New(sampleSources()))
	nameRE := regexp.MustCompile(`nxdns_[a-z_]+\*?`)
	for _, doc := range []string{referenceFile, "../../docs/reference/logs.md", "../../docs/how-to/troubleshoot.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range nameRE.FindAllString(string(b), -1) {
			if prefix, ok := strings.CutSuffix(name, "*"); ok { // a group: nxdns_upstream_*
				if !slices.ContainsFunc(slices.Collect(maps.Keys(fams)), func(f string) bool { return strings.HasPrefix(f, prefix) }) {
					t.Errorf("%s mentions %s, and no series starts so", doc, name)
				}
				continue
			}
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if _, ok := fams[base]; !ok {
					base = strings.TrimSuffix(base, suffix)
				}
			}
			if _, ok := fams[base]; !ok {
				t.Errorf("%s mentions %s, which nxdns does not export", doc, name)
			}
		}
	}
}
