package web

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/forward"
)

const httpReference = "../../docs/reference/http.md"

// TestHTTPReference_documentsHealth: the /api/health field table lists
// exactly the JSON keys Health has, and the example body decodes into
// Health with no unknown field.
func TestHTTPReference_documentsHealth(t *testing.T) {
	b, err := os.ReadFile(httpReference)
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## `/api/health`")
	section, _, _ = strings.Cut(section, "\n## ")

	_, table, _ := strings.Cut(section, "| field | meaning |")
	table, _, _ = strings.Cut(table, "\n\n")
	rowRE := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	documented := map[string]bool{}
	for _, m := range rowRE.FindAllStringSubmatch(table, -1) {
		documented[m[1]] = true
	}
	full := HealthFrom(poolOf(false, true), serverSnapshotBusy(), 0).
		WithZones([]forward.ZoneSnapshot{{Zone: "lan.", Resolver: "udp://192.168.1.1:53", Down: true}}).
		WithHistory("file", "disk full").
		WithLists(2, []string{"ads (never loaded)"})
	raw, err := json.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	collectKeys(t, raw, keys)
	if got, want := slices.Sorted(maps.Keys(documented)), slices.Sorted(maps.Keys(keys)); !slices.Equal(got, want) {
		t.Errorf("%s documents %v, Health has %v", httpReference, got, want)
	}

	_, example, _ := strings.Cut(section, "```json\n")
	example, _, _ = strings.Cut(example, "```")
	dec := json.NewDecoder(strings.NewReader(example))
	dec.DisallowUnknownFields()
	var h Health
	if err := dec.Decode(&h); err != nil {
		t.Errorf("%s: the example does not decode as Health: %v", httpReference, err)
	}
	if h.Status != StatusDegraded || h.Upstreams.InBackoff != 1 {
		t.Errorf("%s: example decoded as %+v", httpReference, h)
	}
}

// collectKeys adds every object key of the JSON document raw, nested ones
// included.
func collectKeys(t *testing.T, raw []byte, keys map[string]bool) {
	t.Helper()
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return // not an object
	}
	for k, v := range obj {
		keys[k] = true
		if bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
			collectKeys(t, v, keys)
		}
	}
}
