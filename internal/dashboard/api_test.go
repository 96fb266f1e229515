package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/upstream"
	"github.com/nxdns/nxdns/internal/web"
)

var now = time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)

// testEpisodes are serve's backoff episodes, oldest first: two of the
// pool's upstream (one ended, whose detail is markup, one ongoing) and one
// of an upstream no longer in the pool.
var testEpisodes = []episodes.Episode{
	{Upstream: "tls://192.0.2.99:853", Start: now.Add(-5 * time.Hour), End: now.Add(-4 * time.Hour), Cause: "network error", Failures: 3},
	{Upstream: "tls://192.0.2.53:853", Start: now.Add(-3 * time.Hour), End: now.Add(-3*time.Hour + 95*time.Second), Cause: "attempt timeout", Detail: "<script>alert(1)</script>", Failures: 6},
	{Upstream: "tls://192.0.2.53:853", Start: now.Add(-10 * time.Minute), Cause: "network error", Failures: 3},
}

// serve runs the dashboard on a real web.Server on loopback over a history
// in memory holding n queries, one a minute back from now.
func serve(t *testing.T, n int) (base string, h *history.History) {
	t.Helper()
	h = history.Open(history.Options{MaxBytes: 64 << 20, MaxAge: 30 * 24 * time.Hour, Flush: time.Hour, Now: func() time.Time { return now }})
	t.Cleanup(func() { h.Close() })
	for i := range n {
		e := &query.Event{
			Time: now.Add(-time.Duration(i+1) * time.Minute), Client: netip.AddrFrom4([4]byte{192, 168, 1, byte(10 + i%3)}),
			Name: fmt.Sprintf("n%d.example.", i), Qtype: dns.TypeA, Qclass: dns.ClassINET, Proto: query.UDP,
			Source: query.SourcePool, Upstream: "tls://192.0.2.53:853", Tried: []string{"tls://192.0.2.53:853"},
			Rcode: dns.RcodeSuccess, Duration: 3 * time.Millisecond,
		}
		if i%4 == 0 {
			e.Source, e.Upstream, e.Tried, e.Rcode = query.SourceBlocked, "", nil, dns.RcodeNameError
			e.Filter = query.Decision{Blocked: true, List: "ads", Rule: "||n0.example^"}
		}
		h.Record(e)
	}
	h.Flush()
	d := New(Deps{
		History: h, Now: func() time.Time { return now },
		Pool: func() upstream.Snapshot {
			return upstream.Snapshot{Upstreams: []upstream.UpstreamSnapshot{{Index: 0, URL: "tls://192.0.2.53:853", Slots: 32, Successes: 7}}}
		},
		StaticClients: func() map[string]string { return map[string]string{"192.168.1.10": "laptop"} },
		Episodes:      func() []episodes.Episode { return testEpisodes },
	})
	s := web.New("127.0.0.1:0", prometheus.NewRegistry(), func() web.Health { return web.Health{} }, nil)
	d.Register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Addr().(*net.TCPAddr).Port)), h
}

func getJSON(t *testing.T, url string, want int, v any) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, want, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: content type %q", url, ct)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
	}
	return string(b)
}

func TestAPI_overview(t *testing.T) {
	base, _ := serve(t, 120)
	var o OverviewJSON
	getJSON(t, base+"/api/overview", http.StatusOK, &o)
	if o.Total != 120 || o.Blocked != 30 || o.BlockedShare != 0.25 || o.ResolutionSec != 60 {
		t.Fatalf("overview: total %d blocked %d share %v res %d", o.Total, o.Blocked, o.BlockedShare, o.ResolutionSec)
	}
	if len(o.TopClients) != 3 || len(o.TopBlocked) == 0 || len(o.Upstreams) != 1 || o.Upstreams[0].Answers != 90 {
		t.Fatalf("tops: %+v %+v %+v", o.TopClients, o.TopBlocked, o.Upstreams)
	}
	var series int64
	for _, p := range o.Series {
		series += p.Total
	}
	if series != 120 {
		t.Errorf("series sums to %d", series)
	}
	// A range that holds only the last 30 minutes.
	getJSON(t, base+"/api/overview?from="+now.Add(-30*time.Minute).Format(time.RFC3339)+"&to="+strconv.FormatInt(now.Unix(), 10)+"&top=2", http.StatusOK, &o)
	if o.Total != 30 || len(o.TopDomains) != 2 {
		t.Fatalf("30 minutes: total %d, %d top domains", o.Total, len(o.TopDomains))
	}
}

func TestAPI_queriesFilterAndPaginate(t *testing.T) {
	base, _ := serve(t, 120)
	var q QueriesJSON
	getJSON(t, base+"/api/queries?source=blocked&limit=500", http.StatusOK, &q)
	if len(q.Queries) != 30 || q.Next != "" || !q.Queries[0].Blocked || q.Queries[0].List != "ads" || !strings.HasPrefix(q.Queries[0].Why, "blocked by list ads") {
		t.Fatalf("blocked: %d rows, next %q, first %+v", len(q.Queries), q.Next, q.Queries[0])
	}
	getJSON(t, base+"/api/queries?rcode=nxdomain&client=192.168.1.10&limit=500", http.StatusOK, &q)
	if len(q.Queries) != 10 { // i%4==0 and i%3==0: every 12th of 120
		t.Fatalf("rcode and client: %d rows", len(q.Queries))
	}
	getJSON(t, base+"/api/queries?name=N11&limit=500", http.StatusOK, &q)
	if len(q.Queries) != 11 { // n11, n110..n119
		t.Fatalf("name: %d rows", len(q.Queries))
	}
	getJSON(t, base+"/api/queries?from="+now.Add(-10*time.Minute).Format(time.RFC3339)+"&to="+now.Format(time.RFC3339), http.StatusOK, &q)
	if len(q.Queries) != 10 {
		t.Fatalf("time range: %d rows", len(q.Queries))
	}
	seen := map[string]bool{}
	url := base + "/api/queries?limit=50"
	for pages := 0; ; pages++ {
		q := QueriesJSON{} // fresh: a last page has no "next" to overwrite the previous one
		getJSON(t, url, http.StatusOK, &q)
		for _, r := range q.Queries {
			if seen[r.Name] {
				t.Fatalf("%s on two pages", r.Name)
			}
			seen[r.Name] = true
		}
		if q.Next == "" {
			if pages != 2 {
				t.Fatalf("%d pages of 50 for 120 rows", pages+1)
			}
			break
		}
		url = base + "/api/queries?limit=50&before=" + q.Next
	}
	if len(seen) != 120 {
		t.Fatalf("pages gave %d distinct rows", len(seen))
	}
}

func TestAPI_clientsAndUpstreams(t *testing.T) {
	base, _ := serve(t, 30)
	var c ClientsJSON
	getJSON(t, base+"/api/clients", http.StatusOK, &c)
	if len(c.Clients) != 3 {
		t.Fatalf("clients: %+v", c.Clients)
	}
	for _, cl := range c.Clients {
		if cl.Address == "192.168.1.10" && (cl.Name != "laptop" || !cl.Static || cl.Queries != 10) {
			t.Errorf("static client: %+v", cl)
		}
	}
	var u UpstreamsJSON
	getJSON(t, base+"/api/upstreams", http.StatusOK, &u)
	if len(u.Upstreams) != 1 || u.Upstreams[0].Successes != 7 || u.Upstreams[0].Answers24h != 22 {
		t.Fatalf("upstreams: %+v", u.Upstreams)
	}
}

func TestAPI_badParametersAre400(t *testing.T) {
	base, _ := serve(t, 5)
	long := strings.Repeat("a", 300)
	for _, tc := range []struct{ name, path string }{
		{"unknown parameter", "/api/overview?fromm=1"},
		{"repeated parameter", "/api/queries?name=a&name=b"},
		{"huge query string", "/api/queries?name=" + strings.Repeat("x", 3000)},
		{"bad time", "/api/overview?from=yesterday"},
		{"negative time", "/api/overview?from=-5"},
		{"from after to", "/api/overview?from=2000&to=1000"},
		{"range over a year", "/api/overview?from=0"},
		{"top 0", "/api/overview?top=0"},
		{"top huge", "/api/overview?top=100000"},
		{"limit 0", "/api/queries?limit=0"},
		{"limit text", "/api/queries?limit=ten"},
		{"limit above max", "/api/queries?limit=501"},
		{"bad rcode", "/api/queries?rcode=FOO"},
		{"name too long", "/api/queries?name=" + long},
		{"control character", "/api/queries?name=a%00b"},
		{"bad cursor", "/api/queries?before=zz"},
		{"short cursor", "/api/queries?before=00ff"},
		{"sql", "/api/queries?name=%27%3B+DROP+TABLE+rows%3B--&limit=abc"},
		{"bad escape", "/api/queries?name=%zz"},
		{"upstreams takes none", "/api/upstreams?x=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e struct{ Error string }
			getJSON(t, base+tc.path, http.StatusBadRequest, &e)
			if e.Error == "" {
				t.Error("no error message")
			}
		})
	}
	// Hostile but well-formed: a search, not an error, and nothing found.
	var q QueriesJSON
	getJSON(t, base+"/api/queries?name=%27%3B+DROP+TABLE+rows%3B--", http.StatusOK, &q)
	if len(q.Queries) != 0 {
		t.Fatalf("%d rows", len(q.Queries))
	}
}
