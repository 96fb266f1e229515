package filter

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
)

// listServer serves one list on loopback; body and status change as a test
// goes on, and it records the conditional headers it was sent.
type listServer struct {
	*httptest.Server
	mu              sync.Mutex
	body            string
	ctype           string
	status          int
	etag            string
	requests        atomic.Int64
	ifNoneMatch     []string
	ifModifiedSince []string
}

func newListServer(t *testing.T, body string) *listServer {
	t.Helper()
	return newListServerAt(t, "", body)
}

// newListServerAt is newListServer on addr ("": any free port), so a test
// can serve a list again at the same URL.
func newListServerAt(t *testing.T, addr, body string) *listServer {
	t.Helper()
	ls := &listServer{body: body, status: 200, etag: `"v1"`, ctype: "text/plain"}
	ls.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls.requests.Add(1)
		ls.mu.Lock()
		defer ls.mu.Unlock()
		inm := r.Header.Get("If-None-Match")
		ls.ifNoneMatch = append(ls.ifNoneMatch, inm)
		ls.ifModifiedSince = append(ls.ifModifiedSince, r.Header.Get("If-Modified-Since"))
		if ls.status == 200 && inm != "" && inm == ls.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", ls.etag)
		w.Header().Set("Last-Modified", "Mon, 30 Nov 2026 10:00:00 GMT")
		w.Header().Set("Content-Type", ls.ctype)
		w.WriteHeader(ls.status)
		fmt.Fprint(w, ls.body)
	}))
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ls.Listener.Close()
		ls.Listener = l
	}
	ls.Start()
	t.Cleanup(ls.Close)
	return ls
}

func (ls *listServer) set(status int, ctype, etag, body string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.status, ls.ctype, ls.etag, ls.body = status, ctype, etag, body
}

func names(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "0.0.0.0 %s%d.example\n", prefix, i)
	}
	return b.String()
}

func blocks(e *Engine, name string) bool { return e.set.Load().decide(name, all).blocked }

func urlCfg(dir, u string) config.Filter {
	f := config.FilterDefaults()
	f.StateDir = dir
	f.Lists = []config.FilterList{{Name: "remote", URL: u}}
	return f
}

func TestDownload_loadsAndKeepsETagAcrossRestarts(t *testing.T) {
	ls := newListServer(t, names("ad", 100))
	dir := t.TempDir()
	e := New(Options{})
	e.Update(urlCfg(dir, ls.URL+"/list.txt"))
	testutil.WaitFor(t, "the first download", 10*time.Second, func() bool { return blocks(e, "ad7.example") })
	if st := e.Snapshot().Lists[0]; st.Rules != 100 || st.Loaded.IsZero() {
		t.Errorf("status %+v", st)
	}
	e.Close()

	// A restart: the copy on disk serves at once, and the next refresh is
	// conditional on the ETag kept beside it.
	ls.Close()
	before := ls.requests.Load()
	e2 := New(Options{})
	defer e2.Close()
	e2.Update(urlCfg(dir, ls.URL+"/list.txt"))
	if !blocks(e2, "ad99.example") {
		t.Fatal("a restart with the network down does not filter from disk")
	}
	if ls.requests.Load() != before {
		t.Error("a fresh copy on disk was downloaded again at start")
	}
	ls2 := newListServerAt(t, ls.Listener.Addr().String(), names("ad", 100)) // the same URL
	cfg := urlCfg(dir, ls2.URL+"/list.txt")
	e3 := New(Options{})
	defer e3.Close()
	e3.Update(cfg)
	if err := e3.Refresh(context.Background(), "remote"); err != nil {
		t.Fatal(err)
	}
	ls2.mu.Lock()
	defer ls2.mu.Unlock()
	if len(ls2.ifNoneMatch) == 0 || ls2.ifNoneMatch[len(ls2.ifNoneMatch)-1] != `"v1"` {
		t.Errorf("If-None-Match sent: %q, want the ETag kept on disk", ls2.ifNoneMatch)
	}
	if ims := ls2.ifModifiedSince; len(ims) == 0 || ims[len(ims)-1] != "Mon, 30 Nov 2026 10:00:00 GMT" {
		t.Errorf("If-Modified-Since sent: %q, want the Last-Modified kept on disk", ims)
	}
}

func TestDownload_qualityGatesKeepTheLastGoodCopy(t *testing.T) {
	ls := newListServer(t, names("ad", 100))
	core, logs := observer.New(zap.WarnLevel)
	e := New(Options{Logger: zap.New(core)})
	defer e.Close()
	e.Update(urlCfg(t.TempDir(), ls.URL+"/list.txt"))
	testutil.WaitFor(t, "the first download", 10*time.Second, func() bool { return blocks(e, "ad50.example") })

	defer func(c int64) { listCap = c }(listCap)
	listCap = 64 << 10
	for i, tc := range []struct {
		status int
		ctype  string
		body   string
	}{
		{500, "text/plain", "oops"},
		{200, "text/html; charset=utf-8", names("ad", 100)},
		{200, "text/plain", "<!doctype html><title>Login</title>"},
		{200, "application/octet-stream", "\x00\x01\x02binary"},
		{200, "text/plain", names("ad", 10)},             // shrunk by more than half
		{200, "text/plain", names("big", 64<<10/20+100)}, // over the cap
	} {
		ls.set(tc.status, tc.ctype, fmt.Sprintf(`"bad%d"`, i), tc.body)
		if err := e.Refresh(context.Background(), "remote"); err == nil {
			t.Errorf("case %d: accepted", i)
		}
		if !blocks(e, "ad50.example") || !blocks(e, "ad99.example") {
			t.Fatalf("case %d: the last good copy was lost", i)
		}
		if st := e.Snapshot().Lists[0]; st.Failures != uint64(i+1) || st.Rules != 100 {
			t.Errorf("case %d: failures %d rules %d", i, st.Failures, st.Rules)
		}
	}
	if n := logs.FilterMessage("list refresh failed; keeping the last good copy").Len(); n != 1 {
		t.Errorf("failure logged %d times in one episode, want once", n)
	}
	// A good copy ends the episode and replaces the rules.
	ls.set(200, "text/plain", `"v2"`, names("new", 80))
	if err := e.Refresh(context.Background(), "remote"); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the rebuild", 10*time.Second, func() bool { return blocks(e, "new79.example") })
	if blocks(e, "ad50.example") {
		t.Error("the old rules stayed after a good refresh")
	}
}

func TestDownload_hostResolvedThroughTheGivenLookup(t *testing.T) {
	ls := newListServer(t, names("ad", 5))
	u, _ := url.Parse(ls.URL)
	var lookups atomic.Int64
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		lookups.Add(1)
		if host != "lists.test" {
			return nil, fmt.Errorf("unexpected host %q", host)
		}
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	e := New(Options{LookupHost: lookup})
	defer e.Close()
	e.Update(urlCfg(t.TempDir(), "http://lists.test:"+u.Port()+"/list.txt"))
	testutil.WaitFor(t, "the download", 10*time.Second, func() bool { return blocks(e, "ad4.example") })
	if lookups.Load() == 0 {
		t.Error("the list host was not resolved through LookupHost")
	}
}

func TestSnapshot_staleLists(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	s := Snapshot{Refresh: 24 * time.Hour, Now: now, Lists: []ListStatus{
		{Name: "fresh", Source: "https://a/x", Loaded: now.Add(-70 * time.Hour)},
		{Name: "old", Source: "https://a/y", Loaded: now.Add(-73 * time.Hour)},
		{Name: "never", Source: "https://a/z"},
		{Name: "file", Source: "/etc/nxdns/x", Loaded: now.Add(-1000 * time.Hour)},
	}}
	got := s.Stale()
	if len(got) != 2 || !strings.HasPrefix(got[0], "old") || !strings.HasPrefix(got[1], "never") {
		t.Errorf("stale %q", got)
	}
}

func TestUpdate_unchangedListsKeepTheSet(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	before := e.set.Load()
	other := cfg.Filter
	other.BlockResponse, other.BlockTTL = config.ResponseRefused, 5
	other.Groups = nil
	e.Update(other)
	if e.set.Load() != before {
		t.Error("a change outside the lists rebuilt the set")
	}
	other.Block = append(other.Block, "new.example")
	e.Update(other)
	if e.set.Load() == before || !blocks(e, "new.example") {
		t.Error("a new inline rule did not rebuild the set")
	}
}

// A reload reads local list files again (configuration reference,
// filter.lists[].path): an operator edits the list and reloads with the
// configuration unchanged. An untouched file costs no rebuild.
func TestUpdate_reloadRereadsAnEditedLocalFile(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	before := e.set.Load()
	e.Update(cfg.Filter)
	if e.set.Load() != before {
		t.Fatal("a reload with no file edited rebuilt the set")
	}
	writeList(t, "", cfg.Filter.Lists[0].Path, "0.0.0.0 ads.example\n0.0.0.0 edited.example\n")
	e.Update(cfg.Filter)
	if !blocks(e, "edited.example") {
		t.Error("a reload after the list file was edited did not read it: its new rule does not block")
	}
	if !blocks(e, "ads.example") || blocks(e, "tracker.example") {
		t.Error("the edited file's rules are not exactly the ones in use")
	}
	after := e.set.Load()
	e.Update(cfg.Filter)
	if e.set.Load() != after {
		t.Error("a second reload with the file as read rebuilt the set again")
	}
}

// A local file that turned bad, or went away, keeps the rules in use, and
// later reloads do not try it again until it changes: a broken list must
// not cost a rebuild on every reload.
func TestUpdate_brokenLocalFileIsTriedAgainOnlyOnceEdited(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, path string)
	}{
		{"turned into HTML", func(t *testing.T, path string) { writeList(t, "", path, "<html>\n") }},
		{"deleted", func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := filterCfg(t)
			e := newEngine(t, cfg.Filter)
			path := cfg.Filter.Lists[0].Path
			failures := func() uint64 {
				e.mu.Lock()
				defer e.mu.Unlock()
				return e.lists["ads"].failures.Load()
			}
			tc.breakIt(t, path)
			e.Update(cfg.Filter)
			if !blocks(e, "ads.example") {
				t.Fatal("the broken file's rules in use were lost")
			}
			if failures() != 1 {
				t.Fatalf("failures %d after the reload that met the broken file, want 1", failures())
			}
			e.Update(cfg.Filter)
			if failures() != 1 {
				t.Errorf("failures %d after a second reload with the file unchanged, want 1: it was tried again", failures())
			}
			writeList(t, "", path, "0.0.0.0 ads.example\n0.0.0.0 fixed.example\n")
			e.Update(cfg.Filter)
			if !blocks(e, "fixed.example") {
				t.Error("the repaired file was not read at the next reload")
			}
		})
	}
}

func TestUpdate_badLocalFileKeepsTheRulesInUse(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	writeList(t, "", cfg.Filter.Lists[0].Path, "<html>\n")
	next := cfg.Filter
	next.Block = []string{"other.example"} // force a rebuild
	e.Update(next)
	if !blocks(e, "ads.example") {
		t.Error("a list file that turned into HTML lost its rules")
	}
}

// TestRefreshNow_downloadsAtOnceAndAReloadFetchesAChangedURL: a "refresh
// now" downloads the list at once (not at the refresh interval) and
// reports each list's outcome; a name that is no URL list is an error; a
// reload that points the list at a new URL downloads it at once, although
// the old URL's copy is fresh.
func TestRefreshNow_downloadsAtOnceAndAReloadFetchesAChangedURL(t *testing.T) {
	ls := newListServer(t, names("ad", 10))
	dir := t.TempDir()
	e := New(Options{})
	defer e.Close()
	e.Update(urlCfg(dir, ls.URL+"/list.txt"))
	testutil.WaitFor(t, "the first download", 10*time.Second, func() bool { return blocks(e, "ad7.example") })

	ls.set(200, "text/plain", `"v2"`, names("ad", 10)+"0.0.0.0 new.example\n")
	res, err := e.RefreshNow(context.Background(), "")
	if err != nil || len(res) != 1 || !res[0].OK || res[0].Rules != 11 {
		t.Fatalf("refresh now: %+v %v", res, err)
	}
	if !blocks(e, "new.example") {
		t.Error("the refreshed copy is not in use")
	}
	ls.set(500, "text/plain", `"v3"`, "")
	if res, _ := e.RefreshNow(context.Background(), "remote"); len(res) != 1 || res[0].OK || res[0].Error == "" || res[0].Rules != 11 {
		t.Errorf("a failed refresh: %+v, want the error and the last good copy's 11 rules", res)
	}
	if _, err := e.RefreshNow(context.Background(), "nope"); err != ErrNoSuchList {
		t.Errorf("an unknown list: %v", err)
	}

	other := newListServer(t, "0.0.0.0 moved.example\n")
	e.Update(urlCfg(dir, other.URL+"/list.txt"))
	testutil.WaitFor(t, "the new URL's download after the reload", 10*time.Second, func() bool { return blocks(e, "moved.example") })
}
