package browsertest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
	dir     string
	dnsPort int
	web     string // http://127.0.0.1:PORT
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

// start runs a binary until the test ends and waits for a line of its
// stderr containing ready.
func start(t *testing.T, ready string, name string, args ...string) {
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
}

// extra is TOML appended to its configuration (groups, clients).
func newStack(t *testing.T, extra ...string) *stack {
	t.Helper()
	s := &stack{dir: t.TempDir()}
	build(t, s.dir)
	upPort := freePort(t)
	start(t, "listening", filepath.Join(s.dir, "nxdns-fakeup"),
		"-listen", fmt.Sprintf("dot://127.0.0.1:%d", upPort),
		"-ca-cert", filepath.Join(s.dir, "ca.pem"), "-ca-key", filepath.Join(s.dir, "ca.key"))

	hash, err := exec.Command("sh", "-c", "printf 'household secret\\n' | "+filepath.Join(s.dir, "nxdns")+" hash-password").Output()
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.dir, "web-password"), hash, 0o600)
	os.WriteFile(filepath.Join(s.dir, "ads.txt"), []byte("0.0.0.0 ads.example\n||tracker.example^\n"), 0o644)
	s.dnsPort, s.web = freePort(t), ""
	webPort := freePort(t)
	s.web = fmt.Sprintf("http://127.0.0.1:%d", webPort)
	conf := fmt.Sprintf(`[dns]
listen = ["127.0.0.1:%d"]
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
`, s.dnsPort, webPort, filepath.Join(s.dir, "web-password"), filepath.Join(s.dir, "history.db"), s.dir, filepath.Join(s.dir, "ads.txt"),
		upPort, filepath.Join(s.dir, "ca.pem"), freePort(t), filepath.Join(s.dir, "ca.pem"))
	conf += strings.Join(extra, "\n")
	os.WriteFile(filepath.Join(s.dir, "nxdns.toml"), []byte(conf), 0o644)
	start(t, "web server listening", filepath.Join(s.dir, "nxdns"), "run", "--config", filepath.Join(s.dir, "nxdns.toml"))
	return s
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
		chromedp.SendKeys(css("input[name=name]"), "tablet"), chromedp.Submit(css("input[name=name]")),
		chromedp.WaitVisible(css("#log td.why")))
	rows := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#log tr.src-pool").length`))
	why := get(t, ctx, chromedp.Text(css("#log td.why")))
	if rows != 1 || !strings.HasPrefix(why, "forwarded to tls://127.0.0.1:") {
		t.Fatalf("search: %d rows, why %q", rows, why)
	}
	shot(t, ctx, "queries")

	// One action: flush the name from the cache, through the login's
	// session and CSRF token; the page says it was done.
	do(t, ctx, chromedp.Click(css("#log button[data-post]")), chromedp.WaitVisible(css("#status.ok")))
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

	// A phone-sized view of the overview.
	do(t, ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(s.web+"/"), chromedp.WaitVisible(css("#total")))
	shot(t, ctx, "overview-phone")
	do(t, ctx, chromedp.EmulateViewport(1000, 700))

	// Log out: back at the login, and the dashboard is closed again.
	do(t, ctx, chromedp.Click(css(".logout button")), chromedp.WaitVisible(css("#password")),
		chromedp.Navigate(s.web+"/queries"), chromedp.WaitVisible(css("#password")))
	if loc := get(t, ctx, chromedp.Location()); !strings.Contains(loc, "/login") {
		t.Fatalf("after logout /queries went to %s", loc)
	}
}
