package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The test's bounds: every wait ends.
const (
	queries = 40 // real DNS queries sent with kdig before the browser looks
)

// stack is the real binaries on loopback: nxdns-fakeup as the DoT upstream
// and nxdns with a password, a history file and a one-second flush. A
// standby upstream on a port nobody listens on is in backoff from its first
// probe: the upstreams page has an ongoing episode to show.
type stack struct {
	list    *listServer // a downloaded list, served on loopback
	dir     string
	dnsPort int
	web     string // http://127.0.0.1:PORT
	upPort  int
	up      *exec.Cmd // the fake upstream
	nxdns   *exec.Cmd // the server (SIGHUP reloads it)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// build compiles the repository's commands into dir.
func build(t *testing.T, dir string) {
	t.Helper()
	for _, c := range []string{"nxdns", "nxdns-fakeup"} {
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, c), "./cmd/"+c)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", c, err, out)
		}
	}
}

// start runs a binary until the test ends (or stop) and waits for a line
// of its stderr containing ready.
func start(t *testing.T, ready string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	// The reader sees every line (none is dropped while the test is busy
	// elsewhere) and says once when the ready line has gone by; it then
	// keeps draining, so the process never blocks on a full pipe.
	found, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			if !seen && strings.Contains(sc.Text(), ready) {
				seen = true
				close(found)
			}
		}
	}()
	select {
	case <-found:
	case <-exited:
		select {
		case <-found: // the ready line was the last one
		default:
			t.Fatalf("%s exited before %q", filepath.Base(name), ready)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no %q within 30 s", filepath.Base(name), ready)
	}
	return cmd
}

// stop ends a process start began, and waits for it.
func stop(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
}

// extra is TOML appended to its configuration (groups, clients).
func newStack(t *testing.T, extra ...string) *stack {
	t.Helper()
	return newStackOn(t, nil, extra...)
}

// newStackOn is newStack with nxdns's DNS also listening on the
// addresses listen (on the same port as on 127.0.0.1).
func newStackOn(t *testing.T, listen []netip.Addr, extra ...string) *stack {
	t.Helper()
	s := &stack{dir: t.TempDir()}
	build(t, s.dir)
	upPort := freePort(t)
	s.upPort = upPort
	s.startUpstream(t)

	hash, err := exec.Command("sh", "-c", "printf 'household secret\\n' | "+filepath.Join(s.dir, "nxdns")+" hash-password").Output()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.dir, "web-password"), hash, 0o600)
	os.WriteFile(filepath.Join(s.dir, "ads.txt"), []byte("0.0.0.0 ads.example\n||tracker.example^\n"), 0o644)
	s.list = newListServer(t, "0.0.0.0 first.example\n")
	s.dnsPort, s.web = freePort(t), ""
	webPort := freePort(t)
	s.web = fmt.Sprintf("http://127.0.0.1:%d", webPort)
	listens := fmt.Sprintf("%q", netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(s.dnsPort)))
	for _, a := range listen {
		listens += fmt.Sprintf(", %q", netip.AddrPortFrom(a, uint16(s.dnsPort)))
	}
	conf := fmt.Sprintf(`[dns]
listen = [%s]
trusted_forwarders = ["127.0.0.2"]
[web]
listen = "127.0.0.1:%d"
password_file = %q
[history]
path = %q
flush_seconds = 1
[filter]
state_dir = %q
[[filter.lists]]
name = "ads"
path = %q
[[filter.lists]]
name = "remote"
url = %q
[log]
queries = false
[[clients]]
ip = "127.0.0.1"
name = "test laptop"
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "localhost"
ca_file = %q
[[upstreams]]
url = "tls://127.0.0.1:%d"
tls_name = "localhost"
ca_file = %q
priority = 1
`, listens, webPort, filepath.Join(s.dir, "web-password"), filepath.Join(s.dir, "history.db"), s.dir, filepath.Join(s.dir, "ads.txt"), s.list.URL+"/list.txt",
		upPort, filepath.Join(s.dir, "ca.pem"), freePort(t), filepath.Join(s.dir, "ca.pem"))
	conf += strings.Join(extra, "\n")
	os.WriteFile(filepath.Join(s.dir, "nxdns.toml"), []byte(conf), 0o644)
	s.nxdns = start(t, "web server listening", filepath.Join(s.dir, "nxdns"), "run", "--config", filepath.Join(s.dir, "nxdns.toml"))
	return s
}

// startUpstream starts the fake DoT upstream on s.upPort, with the CA of
// the first start.
func (s *stack) startUpstream(t *testing.T) {
	t.Helper()
	s.up = start(t, "listening", filepath.Join(s.dir, "nxdns-fakeup"),
		"-listen", fmt.Sprintf("dot://127.0.0.1:%d", s.upPort),
		"-ca-cert", filepath.Join(s.dir, "ca.pem"), "-ca-key", filepath.Join(s.dir, "ca.key"))
}

// traffic sends n real queries with kdig, a client nxdns did not write.
func (s *stack) traffic(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		name := fmt.Sprintf("site%d.example.", i%10)
		if i == 0 {
			name = "tablet-breaks-here.example."
		}
		out, err := exec.Command("kdig", "@127.0.0.1", "-p", strconv.Itoa(s.dnsPort), "+timeout=5", "+retry=0", name, "A").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "NOERROR") {
			t.Fatalf("kdig %s: %v\n%s", name, err, out)
		}
	}
}

// lookup asks for one name with kdig and returns its short answer.
func (s *stack) lookup(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("kdig", "@127.0.0.1", "-p", strconv.Itoa(s.dnsPort), "+timeout=5", "+retry=0", "+short", name, "A").CombinedOutput()
	if err != nil {
		t.Fatalf("kdig %s: %v\n%s", name, err, out)
	}
	return strings.TrimSpace(string(out))
}

func browserCtx(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath()),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1000, 700),
	)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	// The first Run starts the browser and must not carry a timeout (it
	// would stop the browser); later steps get stepTimeout each.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// stepTimeout bounds every group of browser steps.
const stepTimeout = 30 * time.Second

// do runs steps with a bound.
func do(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(c, steps...); err != nil {
		t.Fatal(err)
	}
}

// get runs one action that returns a value, with a bound.
func get[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(c, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func chromiumPath() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	return "/usr/bin/chromium"
}

// shot saves a PNG of the viewport when NXDNS_SCREENSHOTS is set.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("NXDNS_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := get(t, ctx, chromedp.CaptureScreenshot())
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

type css = chromedp.CSS

func TestBrowser_loginOverviewSearchActionLogout(t *testing.T) {
	s := newStack(t)
	s.traffic(t, queries)
	ctx := browserCtx(t)

	// Not logged in: the dashboard sends the browser to the login page.
	do(t, ctx, chromedp.Navigate(s.web+"/"), chromedp.WaitVisible(css("#password")))
	if loc := get(t, ctx, chromedp.Location()); !strings.Contains(loc, "/login") {
		t.Fatalf("not logged in, / went to %s", loc)
	}
	shot(t, ctx, "login")

	// A wrong password stays on the login page with a message.
	do(t, ctx, chromedp.SendKeys(css("#password"), "wrong"), chromedp.Submit(css("#password")), chromedp.WaitVisible(css(".err")))
	if msg := get(t, ctx, chromedp.Text(css(".err"))); !strings.Contains(msg, "Wrong password") {
		t.Fatalf("wrong password says %q", msg)
	}

	// Log in: the overview counts the real queries (flushed every second;
	// the overview also reads what is not flushed yet).
	do(t, ctx, chromedp.SendKeys(css("#password"), "household secret"), chromedp.Submit(css("#password")), chromedp.WaitVisible(css("#total")))
	total, blocked := get(t, ctx, chromedp.Text(css("#total"))), get(t, ctx, chromedp.Text(css("#blocked")))
	if total != strconv.Itoa(queries) || blocked != "0" {
		t.Fatalf("overview shows %s queries, %s blocked; sent %d", total, blocked, queries)
	}
	shot(t, ctx, "overview")

	// Search the query log for the one name the tablet broke on.
	do(t, ctx, chromedp.Navigate(s.web+"/queries"), chromedp.WaitVisible(css("input[name=name]")),
		chromedp.SendKeys(css("input[name=name]"), "tablet\r"))
	poll(t, ctx, `location.search.includes("name=tablet") && document.querySelector("#log td.why") !== null`)
	rows := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#log tr.src-pool").length`))
	why := get(t, ctx, chromedp.Text(css("#log td.why")))
	if rows != 1 || !strings.HasPrefix(why, "forwarded to tls://127.0.0.1:") {
		t.Fatalf("search: %d rows, why %q", rows, why)
	}
	shot(t, ctx, "queries")

	// One action: flush the name from the cache, through the login's
	// session and CSRF token; the page says it was done.
	do(t, ctx, chromedp.Click(css("#log details.menu summary")), chromedp.Click(css("#log button.flush")), chromedp.WaitVisible(css("#status.ok")))
	if status := get(t, ctx, chromedp.Text(css("#status"))); !strings.HasPrefix(status, "Done: ") {
		t.Fatalf("action status %q, want the flush done", status)
	}

	// The other pages render with the traffic.
	do(t, ctx, chromedp.Navigate(s.web+"/clients/127.0.0.1"), chromedp.WaitVisible(css("h1")))
	if h1 := get(t, ctx, chromedp.Text(css("h1"))); h1 != "test laptop" {
		t.Fatalf("client page title %q", h1)
	}
	shot(t, ctx, "client")
	do(t, ctx, chromedp.Navigate(s.web+"/upstreams"), chromedp.WaitVisible(css("table")))
	if up := get(t, ctx, chromedp.Text(css("table"))); !strings.Contains(up, "healthy") || !strings.Contains(up, "backoff") {
		t.Fatalf("upstreams %q: want the primary healthy and the dead standby in backoff", up)
	}
	stretches := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.timeline rect.backoff.ongoing").length`))
	episode := get(t, ctx, chromedp.Text(css("#episode-table tr.ongoing")))
	if stretches != 1 || !strings.Contains(episode, "ongoing") || !strings.Contains(episode, "network error") {
		t.Fatalf("episodes: %d ongoing stretches, row %q; want the standby's one", stretches, episode)
	}
	do(t, ctx, chromedp.EmulateViewport(1000, 860)) // the episodes' table too
	shot(t, ctx, "upstreams")
	do(t, ctx, chromedp.EmulateViewport(1000, 700))

	// The lists page shows the list's rules and outcome; a check of a
	// blocked name offers "allow", and after the click the name is
	// answered by the upstream and listed as allowed.
	if got := s.lookup(t, "x.tracker.example."); got != "0.0.0.0" {
		t.Fatalf("x.tracker.example before the allow: %q, want the block", got)
	}
	do(t, ctx, chromedp.Navigate(s.web+"/lists"), chromedp.WaitVisible(css("#lists")))
	if lists := get(t, ctx, chromedp.Text(css("#lists"))); !strings.Contains(lists, "ads") || !strings.Contains(lists, "\t2\t") || !strings.Contains(lists, "ok") {
		t.Fatalf("lists page: %q", lists)
	}
	do(t, ctx, chromedp.SendKeys(css("form[data-action='/api/filter/check'] input[name=name]"), "x.tracker.example"),
		chromedp.Click(css("form[data-action='/api/filter/check'] button")),
		chromedp.WaitVisible(css("#result-actions button")))
	if status := get(t, ctx, chromedp.Text(css("#status"))); !strings.Contains(status, "blocked by list ads rule ||tracker.example^") {
		t.Fatalf("check says %q", status)
	}
	shot(t, ctx, "lists")
	do(t, ctx, chromedp.Click(css("#result-actions button")), chromedp.WaitVisible(css("#status.ok")))
	if status := get(t, ctx, chromedp.Text(css("#status"))); !strings.Contains(status, "x.tracker.example and the names below it are allowed now") {
		t.Fatalf("allow says %q", status)
	}
	if got := s.lookup(t, "x.tracker.example."); got == "0.0.0.0" || got == "" {
		t.Fatalf("x.tracker.example after the allow: %q, want the upstream's answer", got)
	}
	do(t, ctx, chromedp.Navigate(s.web+"/lists"), chromedp.WaitVisible(css("#allowed")))
	if allowed := get(t, ctx, chromedp.Text(css("#allowed"))); !strings.Contains(allowed, "x.tracker.example") {
		t.Fatalf("allowed names: %q", allowed)
	}
	// The cache page counts the entries the traffic left.
	do(t, ctx, chromedp.Navigate(s.web+"/cache"), chromedp.WaitVisible(css("#entries")))
	if n, _ := strconv.Atoi(get(t, ctx, chromedp.Text(css("#entries")))); n < 10 {
		t.Fatalf("cache page shows %d entries after %d queries for 11 names", n, queries)
	}
	shot(t, ctx, "cache")

	refreshAList(t, ctx, s)
	noSidewaysScroll(t, ctx, s)
	blockFromTheQueryLog(t, ctx, s)
	ntaOnTheDNSSECPage(t, ctx, s)
	screenshots(t, ctx, s)
	bannerFollowsTheUpstream(t, ctx, s)

	// Log out: back at the login, and the dashboard is closed again.
	do(t, ctx, chromedp.Click(css(".logout button")), chromedp.WaitVisible(css("#password")),
		chromedp.Navigate(s.web+"/queries"), chromedp.WaitVisible(css("#password")))
	if loc := get(t, ctx, chromedp.Location()); !strings.Contains(loc, "/login") {
		t.Fatalf("after logout /queries went to %s", loc)
	}
}

// TestBrowser_newDeviceFlaggedAndAcknowledged: a device seen for the first
// time (its MAC sent by a trusted forwarder, 127.0.0.2, as dnsmasq's
// add-mac does) is listed on the Devices page as new with its MAC; the
// clients page points at it; "acknowledge" moves it to the known devices.
func TestBrowser_newDeviceFlaggedAndAcknowledged(t *testing.T) {
	s := newStack(t)
	out, err := exec.Command("kdig", "-b", "127.0.0.2", "@127.0.0.1", "-p", strconv.Itoa(s.dnsPort), "+timeout=5", "+retry=0",
		"+ednsopt=65001:02005e005377", "visitor-phone.example.", "A").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "NOERROR") {
		t.Fatalf("kdig with add-mac: %v\n%s", err, out)
	}
	ctx := browserCtx(t)
	do(t, ctx, chromedp.Navigate(s.web+"/"), chromedp.WaitVisible(css("#password")),
		chromedp.SendKeys(css("#password"), "household secret"), chromedp.Submit(css("#password")), chromedp.WaitVisible(css("#total")))
	do(t, ctx, chromedp.Navigate(s.web+"/clients"), chromedp.WaitVisible(css("#new-devices-note")))
	do(t, ctx, chromedp.Navigate(s.web+"/devices"), chromedp.WaitVisible(css("#new-devices")))
	if row := get(t, ctx, chromedp.Text(css("#new-devices tr.new"))); !strings.Contains(row, "02:00:5e:00:53:77") || !strings.Contains(row, "new") {
		t.Fatalf("new devices row %q, want the MAC flagged new", row)
	}
	shot(t, ctx, "devices")
	do(t, ctx, chromedp.Click(css("#new-devices button[data-post]")), chromedp.WaitNotPresent(css("#new-devices")),
		chromedp.WaitVisible(css("#known-devices")))
	if known := get(t, ctx, chromedp.Text(css("#known-devices"))); !strings.Contains(known, "02:00:5e:00:53:77") {
		t.Fatalf("known devices %q, want the acknowledged MAC", known)
	}
}

// widths are the viewport widths the layout must hold at (docs/dashboard.md
// "Layout"): a phone, a tablet, a laptop and a desktop.
var widths = []int64{390, 768, 1280, 1920}

// noSidewaysScroll: at every width, no page is wider than the viewport
// (a table too wide scrolls inside its own box, names wrap).
func noSidewaysScroll(t *testing.T, ctx context.Context, s *stack) {
	t.Helper()
	pages := []string{"/", "/queries", "/clients", "/clients/127.0.0.1", "/upstreams", "/lists", "/cache", "/changes", "/dnssec"}
	for _, w := range widths {
		do(t, ctx, chromedp.EmulateViewport(w, 900))
		for _, p := range pages {
			do(t, ctx, chromedp.Navigate(s.web+p), chromedp.WaitVisible(css("h1")))
			if wide := get(t, ctx, chromedp.Evaluate[string](`document.documentElement.scrollWidth > innerWidth ? document.documentElement.scrollWidth + " > " + innerWidth : ""`)); wide != "" {
				t.Errorf("%s at %d px scrolls sideways: %s", p, w, wide)
			}
		}
	}
	do(t, ctx, chromedp.EmulateViewport(1000, 700))
}

// blockFromTheQueryLog: on a phone, a name from the query log is blocked
// through the row's actions menu; kdig then gets the block; the "changes
// made here" page shows the TOML that makes it permanent, and dropping it
// there unblocks the name.
func blockFromTheQueryLog(t *testing.T, ctx context.Context, s *stack) {
	t.Helper()
	if got := s.lookup(t, "site3.example."); got == "0.0.0.0" || got == "" {
		t.Fatalf("site3.example before the block: %q", got)
	}
	do(t, ctx, chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(s.web+"/queries?name=site3"), chromedp.WaitVisible(css("#log details.menu summary")),
		chromedp.Click(css("#log details.menu summary")), chromedp.WaitVisible(css("#log button.block")))
	shot(t, ctx, "queries-phone")
	do(t, ctx, chromedp.Click(css("#log button.block")), chromedp.WaitVisible(css("#status.ok")))
	if status := get(t, ctx, chromedp.Text(css("#status"))); !strings.Contains(status, "site3.example and the names below it are blocked now") {
		t.Fatalf("block says %q", status)
	}
	if got := s.lookup(t, "site3.example."); got != "0.0.0.0" {
		t.Fatalf("site3.example after the block: %q, want 0.0.0.0", got)
	}
	do(t, ctx, chromedp.EmulateViewport(1000, 700), chromedp.Navigate(s.web+"/changes"), chromedp.WaitVisible(css("#changes")))
	if text := get(t, ctx, chromedp.Text(css("#changes"))); !strings.Contains(text, `block = ["||site3.example^"]`) || !strings.Contains(text, `services.nxdns.settings.filter.block = [ "||site3.example^" ];`) {
		t.Fatalf("changes page: %q", text)
	}
	shot(t, ctx, "changes")
	do(t, ctx, chromedp.Click(css(`#changes button[data-name="site3.example"]`)))
	poll(t, ctx, `document.querySelector('#changes button[data-name="site3.example"]') === null`) // dropped, and the page reloaded
	if got := s.lookup(t, "site3.example."); got == "0.0.0.0" || got == "" {
		t.Fatalf("site3.example after the drop: %q, want the upstream's answer", got)
	}
}

// ntaOnTheDNSSECPage: a negative trust anchor set through the route the
// "stop validating ZONE for 24 h" buttons post to (docs/dnssec.md) is
// listed on the DNSSEC page, and its "validate again" button ends it.
func ntaOnTheDNSSECPage(t *testing.T, ctx context.Context, s *stack) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(s.web+"/dnssec"), chromedp.WaitVisible(css("#dnssec-nta")))
	get(t, ctx, chromedp.Evaluate[string](`fetch("/api/dnssec/nta?name=nta.example&minutes=1440", {method: "POST", headers: {"X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content}}).then(function (r) { window.ntaStatus = r.status; }), "sent"`))
	poll(t, ctx, `window.ntaStatus === 200`)
	do(t, ctx, chromedp.Reload(), chromedp.WaitVisible(css(`#dnssec-nta button[data-name="nta.example"]`)),
		chromedp.Click(css(`#dnssec-nta button[data-name="nta.example"]`)))
	poll(t, ctx, `document.querySelector('#dnssec-nta button[data-name="nta.example"]') === null`) // ended, and the page reloaded
}

// screenshots are the docs' pictures (docs/img, named in docs/dashboard.md):
// the overview on a desktop and a phone, light and dark, and the query log
// on a phone.
func screenshots(t *testing.T, ctx context.Context, s *stack) {
	t.Helper()
	if os.Getenv("NXDNS_SCREENSHOTS") == "" {
		return
	}
	for _, dark := range []bool{false, true} {
		scheme, suffix := "light", ""
		if dark {
			scheme, suffix = "dark", "-dark"
		}
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
			t.Fatal(err)
		}
		do(t, ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(s.web+"/"), chromedp.WaitVisible(css("#total")))
		shot(t, ctx, "overview"+suffix)
		do(t, ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(s.web+"/"), chromedp.WaitVisible(css("#total")))
		shot(t, ctx, "overview-phone"+suffix)
		do(t, ctx, chromedp.Navigate(s.web+"/queries"), chromedp.WaitVisible(css("#log")))
		shot(t, ctx, "queries-phone"+suffix)
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, chromedp.EmulateViewport(1000, 700))
}

// bannerFollowsTheUpstream: with the fake upstream stopped and a few
// queries failing, every upstream is in backoff and the banner says so on
// an open page; when the upstream is back, the banner goes by itself.
func bannerFollowsTheUpstream(t *testing.T, ctx context.Context, s *stack) {
	t.Helper()
	do(t, ctx, chromedp.Navigate(s.web+"/lists"), chromedp.WaitVisible(css("h1")))
	if n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#banner p.error").length`)); n != 0 {
		t.Fatalf("banner up before the upstream stopped (%d lines)", n)
	}
	stop(s.up)
	// Failures put the primary in backoff (the standby is already): four
	// queries at once, so the wait is one query's, not four.
	var fails []*exec.Cmd
	for i := range 4 {
		c := exec.Command("kdig", "@127.0.0.1", "-p", strconv.Itoa(s.dnsPort), "+timeout=5", "+retry=0", fmt.Sprintf("down%d.example.", i), "A")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		fails = append(fails, c)
	}
	for _, c := range fails {
		c.Wait()
	}
	poll(t, ctx, `document.querySelector("#banner p.error") !== null`)
	text := get(t, ctx, chromedp.Text(css("#banner")))
	if !strings.Contains(text, "cannot reach any of its DNS providers") {
		t.Fatalf("banner says %q", text)
	}
	shot(t, ctx, "banner")
	s.startUpstream(t)
	poll(t, ctx, `document.querySelector("#banner p.error") === null`)
}

// poll waits, bounded, for a JavaScript condition on the open page. A
// page that reloads meanwhile (a button with data-reload) ends one
// chromedp.Poll; the next one polls the new page.
func poll(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(c, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(200*time.Millisecond)))
		if err == nil {
			return
		}
		if c.Err() != nil {
			t.Fatalf("waiting for %s: %v", cond, err)
		}
	}
}

// listServer serves one downloaded list on loopback; its body changes as
// the test goes on.
type listServer struct {
	*httptest.Server
	mu   sync.Mutex
	body string
}

func newListServer(t *testing.T, body string) *listServer {
	t.Helper()
	ls := &listServer{body: body}
	ls.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, ls.body)
	}))
	t.Cleanup(ls.Close)
	return ls
}

// refreshAList: the list's server gains a name; the lists page's "Refresh
// now" downloads it at once (not at refresh_hours), the page shows the new
// rule count and kdig gets the block.
func refreshAList(t *testing.T, ctx context.Context, s *stack) {
	t.Helper()
	if got := s.lookup(t, "second.example."); got == "0.0.0.0" || got == "" {
		t.Fatalf("second.example before the refresh: %q", got)
	}
	s.list.mu.Lock()
	s.list.body = "0.0.0.0 first.example\n0.0.0.0 second.example\n"
	s.list.mu.Unlock()
	do(t, ctx, chromedp.Navigate(s.web+"/lists"), chromedp.WaitVisible(css(`#lists button[data-name="remote"]`)),
		chromedp.Click(css(`#lists button[data-name="remote"]`)))
	poll(t, ctx, `[...document.querySelectorAll("#lists tr")].some(r => r.textContent.includes("remote") && r.cells[2] && r.cells[2].textContent === "2")`)
	if got := s.lookup(t, "second.example."); got != "0.0.0.0" {
		t.Fatalf("second.example after the refresh: %q, want the block", got)
	}
}
