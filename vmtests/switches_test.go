package vmtests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
)

// The household switches through the real binary (docs/filter.md "Blocked
// services", "Safe search"): kdig from the kids' and the teens' addresses,
// the fake upstream answering the safe endpoints (its answer to a name is
// fakeup.AddressV4 of that name, so the address proves which name was
// resolved), its counters proving the endpoint went through the upstream
// once and then came from the cache.

func TestSwitchesThroughTheBinary(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	extra := fmt.Sprintf(`[filter]
state_dir = %q

[[filter.groups]]
name = "kids"
clients = ["127.0.0.2"]
services = ["tiktok"]
safe_search = ["google", "bing", "duckduckgo", "youtube"]

[[filter.groups]]
name = "teens"
clients = ["127.0.0.3"]
safe_search = ["youtube"]
youtube_mode = "moderate"
`, t.TempDir())
	p := startNxdns(t, ca, settings{queryLog: true, extra: extra}, up)

	for _, tc := range []struct{ src, name, engine, target string }{
		{"127.0.0.2", "www.google.com", "google", "forcesafesearch.google.com"},
		{"127.0.0.2", "www.google.co.uk", "google", "forcesafesearch.google.com"},
		{"127.0.0.2", "google.de", "google", "forcesafesearch.google.com"},
		{"127.0.0.2", "www.bing.com", "bing", "strict.bing.com"},
		{"127.0.0.2", "duckduckgo.com", "duckduckgo", "safe.duckduckgo.com"},
		{"127.0.0.2", "www.youtube.com", "youtube", "restrict.youtube.com"},
		{"127.0.0.3", "m.youtube.com", "youtube", "restrictmoderate.youtube.com"},
	} {
		before := up.counts().Queries
		out := p.kdig(t, tc.src, tc.name, "A")
		addr := fakeup.AddressV4(tc.target).String()
		if !hasRR(out, tc.name, "CNAME", tc.target+".") || !hasRR(out, tc.target, "A", addr) {
			t.Errorf("%s from %s: want a CNAME to %s and its address %s:\n%s", tc.name, tc.src, tc.target, addr, out)
		}
		// The target is the upstream's the first time, the cache's then.
		first := up.counts().Queries - before
		out = p.kdig(t, tc.src, tc.name, "A")
		if !strings.Contains(out, addr) || up.counts().Queries-before != first {
			t.Errorf("%s asked again: %d more upstream queries (want the cache's answer):\n%s", tc.name, up.counts().Queries-before-first, out)
		}
		// A query's line is written after its answer was sent.
		testutil.WaitFor(t, tc.name+"'s query log line with the safe-search reason", 10*time.Second, func() bool {
			return p.logs.count(`"name": "`+tc.name+`."`, `"reason": "safe search: `+tc.engine) > 0
		})
	}
	// A client in neither group gets the search engine itself.
	if out := p.kdig(t, "127.0.0.1", "www.google.com", "A"); strings.Contains(out, "CNAME") || !strings.Contains(out, fakeup.AddressV4("www.google.com").String()) {
		t.Errorf("an ungrouped client was rewritten:\n%s", out)
	}
	// The teens have no google switch.
	if out := p.kdig(t, "127.0.0.3", "www.google.com", "A"); strings.Contains(out, "forcesafesearch") {
		t.Errorf("the teens got the kids' google switch:\n%s", out)
	}

	// Blocked service: TikTok for the kids, with EDE 15 and the reason in
	// the log and the check endpoint.
	before := up.counts().Queries
	if out := p.kdig(t, "127.0.0.2", "www.tiktok.com", "A", "+edns"); !strings.Contains(out, "0.0.0.0") || !strings.Contains(out, "service TikTok") {
		t.Errorf("TikTok for the kids:\n%s", out)
	}
	if up.counts().Queries != before {
		t.Error("a blocked service's query reached the upstream")
	}
	testutil.WaitFor(t, "the query log line saying blocked service: TikTok (group kids)", 10*time.Second, func() bool {
		return p.logs.count(`"reason": "blocked service: TikTok (group kids)"`) > 0
	})
	var d struct {
		Blocked     bool   `json:"blocked"`
		Service     string `json:"service"`
		Explanation string `json:"explanation"`
	}
	getJSON(t, "http://"+p.web+"/api/filter/check?name=tiktokv.com&client=127.0.0.2", &d)
	if !d.Blocked || d.Service != "TikTok" || !strings.Contains(d.Explanation, "blocked service: TikTok (group kids)") {
		t.Errorf("check: %+v", d)
	}
	// Switched on for the teens from the API: the next query is blocked.
	p.post(t, "/api/filter/groups/switch?group=teens&service=tiktok&state=on")
	if out := p.kdig(t, "127.0.0.3", "www.tiktok.com", "A", "+edns"); !strings.Contains(out, "service TikTok") {
		t.Errorf("TikTok switched on for the teens, still answered:\n%s", out)
	}
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatal(err)
	}
}

// hasRR reports whether kdig's output has a record of owner (without its
// final dot), type and data in a section.
func hasRR(out, owner, rrtype, data string) bool {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 5 && f[0] == owner+"." && f[2] == "IN" && f[3] == rrtype && f[4] == data {
			return true
		}
	}
	return false
}
