package vmtests

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/testutil"
)

// Filtering through the real binary (docs/design.md#local-answers, docs/design.md#filtering): lists served by a
// local HTTP server, queries asked with kdig, the decisions read from the
// answers, the fake upstream's counters and the API.

// kdig asks nxdns with kdig from source address src and returns its output.
func (p *nxdnsProc) kdig(t *testing.T, src, name string, args ...string) string {
	t.Helper()
	host, port, _ := net.SplitHostPort(p.dns)
	argv := append([]string{"-b", src, "-p", port, "@" + host, "+timeout=5", "+retry=0", name}, args...)
	out, err := exec.Command("kdig", argv...).CombinedOutput()
	if err != nil {
		t.Fatalf("kdig %v: %v\n%s", argv, err, out)
	}
	return string(out)
}

func (p *nxdnsProc) post(t *testing.T, path string) {
	t.Helper()
	resp, err := http.Post("http://"+p.web+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
}

func TestFilterThroughTheBinary(t *testing.T) {
	skipShort(t)
	if _, err := exec.LookPath("kdig"); err != nil {
		t.Skip("kdig is not installed")
	}
	var served atomic.Int64
	lists := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		w.Header().Set("ETag", `"1"`)
		switch r.URL.Path {
		case "/ads.txt":
			fmt.Fprint(w, "# ads\n0.0.0.0 ads.example\n||tracker.example^\n@@||ok.tracker.example^\n")
		case "/games.txt":
			fmt.Fprint(w, "||games.example^\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer lists.Close()
	ca := newTestCA(t)
	up := startUpstream(t, ca, "dot://127.0.0.1:0")
	state := t.TempDir()
	extra := fmt.Sprintf(`[filter]
state_dir = %q
allow = ["fine.ads.example"]

[[filter.lists]]
name = "ads"
url = "%s/ads.txt"

[[filter.lists]]
name = "games"
url = "%s/games.txt"

[[filter.groups]]
name = "default"
lists = ["ads"]

[[filter.groups]]
name = "kids"
clients = ["127.0.0.2"]
lists = ["ads", "games"]
`, state, lists.URL, lists.URL)
	p := startNxdns(t, ca, settings{queryLog: true, extra: extra}, up)
	testutil.WaitFor(t, "the lists' first download and the start-up probe", 20*time.Second, func() bool {
		f := p.metrics(t)
		return metric(f, "nxdns_filter_rules", "list", "ads") == 3 && metric(f, "nxdns_filter_rules", "list", "games") == 1 &&
			metric(f, "nxdns_upstream_probes_total") > 0
	})

	// Blocked: 0.0.0.0 with EDE 15 naming list and rule; never forwarded.
	before := up.counts().Queries
	out := p.kdig(t, "127.0.0.1", "x.tracker.example", "A", "+edns")
	if !strings.Contains(out, "0.0.0.0") || !strings.Contains(out, "EDE: 15 (Blocked)") || !strings.Contains(out, "list ads rule ||tracker.example^") {
		t.Errorf("blocked answer:\n%s", out)
	}
	out = p.kdig(t, "127.0.0.1", "ads.example", "AAAA", "+edns")
	if !strings.Contains(out, "::") || !strings.Contains(out, "EDE: 15") {
		t.Errorf("blocked AAAA:\n%s", out)
	}
	if got := up.counts().Queries - before; got != 0 {
		t.Errorf("%d blocked queries reached the upstream", got)
	}

	// Allowed (an @@ exception, an inline allow, a name on no list): forwarded.
	for _, name := range []string{"ok.tracker.example", "fine.ads.example", "news.example"} {
		before = up.counts().Queries
		out = p.kdig(t, "127.0.0.1", name, "A", "+edns")
		if strings.Contains(out, "EDE: 15") || up.counts().Queries != before+1 {
			t.Errorf("%s was not forwarded:\n%s", name, out)
		}
	}

	// Grouped: games.example is blocked for the kids' address only.
	if out = p.kdig(t, "127.0.0.2", "games.example", "A", "+edns"); !strings.Contains(out, "list games rule ||games.example^") {
		t.Errorf("kids' client:\n%s", out)
	}
	if out = p.kdig(t, "127.0.0.1", "games.example", "A", "+edns"); strings.Contains(out, "EDE: 15") {
		t.Errorf("a default client got the kids' list:\n%s", out)
	}

	// Paused for one client, then resumed. Asked three times while paused, the
	// name is cached and its hits go by the UDP fast path (the second answer
	// leaves the template, the third uses it): once resumed, the filter must
	// still win over the cached answer.
	p.post(t, "/api/filter/pause?minutes=5&client=127.0.0.1")
	for range 3 {
		if out = p.kdig(t, "127.0.0.1", "ads.example", "A", "+edns"); strings.Contains(out, "EDE: 15") {
			t.Errorf("paused client still filtered:\n%s", out)
		}
	}
	if out = p.kdig(t, "127.0.0.2", "ads.example", "A", "+edns"); !strings.Contains(out, "EDE: 15") {
		t.Errorf("another client's pause unblocked this one:\n%s", out)
	}
	p.post(t, "/api/filter/resume")
	if out = p.kdig(t, "127.0.0.1", "ads.example", "A", "+edns"); !strings.Contains(out, "EDE: 15") {
		t.Errorf("resume did not end the pause:\n%s", out)
	}
	// The query log carries the decision.
	if n := p.logs.count(`"source": "blocked"`, `"list": "ads"`, `"rule": "||tracker.example^"`); n == 0 {
		t.Errorf("no query log line with source blocked and the list\n%s", p.logs.String())
	}
	if f := p.metrics(t); metric(f, "nxdns_filter_blocked_total", "list", "ads") < 4 {
		t.Errorf("nxdns_filter_blocked_total{list=ads} = %v", metric(f, "nxdns_filter_blocked_total", "list", "ads"))
	}
	// Local answers (docs/design.md#local-answers): what a new user tried first never leaves.
	before = up.counts().Queries
	// A single label is NODATA, not NXDOMAIN (docs/local.md).
	for _, q := range [][]string{{"-x", "10.1.2.3", "NXDOMAIN"}, {"nas", "A", "NOERROR"}, {"printer.local", "A", "NXDOMAIN"}, {"use-application-dns.net", "A", "NXDOMAIN"}} {
		out = p.kdig(t, "127.0.0.1", q[0], q[1])
		if !strings.Contains(out, "status: "+q[2]) {
			t.Errorf("%v: not %s\n%s", q[:2], q[2], out)
		}
	}
	if got := up.counts().Queries - before; got != 0 {
		t.Errorf("%d private or special queries reached the upstream", got)
	}
	p.stop(t)

	// A restart with the list server gone still filters, from the copies in
	// filter.state_dir, from the first query.
	lists.Close()
	if _, err := filepath.Glob(filepath.Join(state, "*.list")); err != nil {
		t.Fatal(err)
	}
	p2 := startNxdns(t, ca, settings{queryLog: true, extra: extra}, up)
	if out = p2.kdig(t, "127.0.0.1", "ads.example", "A", "+edns"); !strings.Contains(out, "EDE: 15") {
		t.Errorf("after a restart without the list server:\n%s\nlog:\n%s", out, p2.logs.String())
	}
}
