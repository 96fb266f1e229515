package browsertest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// lookupFrom is lookup from another loopback source address: a device of
// its own as the groups see it.
func (s *stack) lookupFrom(t *testing.T, src, name string) string {
	t.Helper()
	out, err := exec.Command("kdig", "@127.0.0.1", "-p", strconv.Itoa(s.dnsPort), "-b", src, "+timeout=5", "+retry=0", "+short", name, "A").CombinedOutput()
	if err != nil {
		t.Fatalf("kdig -b %s %s: %v\n%s", src, name, err, out)
	}
	return strings.TrimSpace(string(out))
}

// fill sets a form field's value.
func fill(sel, value string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void]("document.querySelector(" + strconv.Quote(sel) + ").value = " + strconv.Quote(value) + "; undefined")
}

// TestBrowser_manageListsAndGroupsThenMakeThemPermanent: a parent adds a
// list (served on loopback) on the manage page, refreshes it and kdig
// gets its names blocked; makes a "kids" group with a device (127.0.0.3),
// TikTok blocked and a schedule, and kdig from that device is blocked,
// from another not; moves the schedule to another day and the device is
// answered again, then back; a device known by its MAC (behind a trusted
// forwarder) is put in the group from the devices page and kdig naming
// that MAC is blocked. No page scrolls sideways at the four widths.
// The "changes made here" page's TOML, pasted into the file and reloaded
// (SIGHUP), with every change then dropped, gives the same answers.
func TestBrowser_manageListsAndGroupsThenMakeThemPermanent(t *testing.T) {
	s := newStack(t)
	extra := newListServer(t, "0.0.0.0 extra.example\n")
	ctx := browserCtx(t)
	do(t, ctx, chromedp.Navigate(s.web+"/manage"), chromedp.WaitVisible(css("#password")),
		chromedp.SendKeys(css("#password"), "household secret"), chromedp.Submit(css("#password")),
		chromedp.WaitVisible(css("header")))
	do(t, ctx, chromedp.Navigate(s.web+"/manage"), chromedp.WaitVisible(css("#add-list")))

	// Add a list, then refresh it after its server gains a name.
	do(t, ctx, fill(`#add-list input[name="name"]`, "extra"), fill(`#add-list input[name="url"]`, extra.URL+"/extra.txt"),
		chromedp.Click(css(`#add-list button`)))
	poll(t, ctx, `document.querySelector('tr[data-list="extra"]') !== null`) // added, and the page reloaded
	extra.mu.Lock()
	extra.body = "0.0.0.0 extra.example\n0.0.0.0 extra2.example\n"
	extra.mu.Unlock()
	do(t, ctx, chromedp.Click(css(`tr[data-list="extra"] button[data-post="/api/filter/lists/refresh"]`)), chromedp.WaitVisible(css("#status.ok")))
	if status := get(t, ctx, chromedp.Text(css("#status"))); !strings.Contains(status, "extra: 2 rules") {
		t.Fatalf("refresh says %q", status)
	}
	for _, n := range []string{"extra.example.", "extra2.example."} {
		if got := s.lookup(t, n); got != "0.0.0.0" {
			t.Fatalf("%s after the list was added and refreshed: %q, want 0.0.0.0", n, got)
		}
	}

	// A group for the kids' tablet: TikTok blocked inside its window.
	if got := s.lookupFrom(t, "127.0.0.3", "www.tiktok.com."); got == "0.0.0.0" {
		t.Fatal("TikTok blocked before the group")
	}
	do(t, ctx, fill(`#add-group input[name="name"]`, "kids"), fill(`#add-group input[name="devices"]`, "127.0.0.3"),
		fill(`#add-group input[name="lists"]`, "ads, remote, extra"), fill(`#add-group input[name="services"]`, "tiktok"),
		fill(`#add-group input[name="from"]`, "00:00"), fill(`#add-group input[name="to"]`, "24:00"),
		chromedp.Click(css(`#add-group button`)))
	poll(t, ctx, `document.querySelector('tr[data-group="kids"]') !== null`)
	do(t, ctx, chromedp.Navigate(s.web+"/manage"), chromedp.WaitVisible(css("#manage-groups")))
	shot(t, ctx, "manage")
	kidsBlocked := func(want bool) {
		t.Helper()
		if got := s.lookupFrom(t, "127.0.0.3", "www.tiktok.com."); (got == "0.0.0.0") != want {
			t.Fatalf("TikTok from the kids' tablet: %q, want blocked %v", got, want)
		}
		if got := s.lookup(t, "www.tiktok.com."); got == "0.0.0.0" {
			t.Fatal("TikTok blocked for the laptop, which is in no group")
		}
	}
	kidsBlocked(true)

	// The window moved to the day after tomorrow, then back to every day.
	later := strings.ToLower(time.Now().AddDate(0, 0, 2).Weekday().String()[:3])
	for _, days := range []string{later, ""} {
		do(t, ctx, chromedp.Click(css(`tr[data-group="kids"] details.edit summary`)),
			fill(`tr[data-group="kids"] input[name="days"]`, days), chromedp.Click(css(`tr[data-group="kids"] form button`)))
		poll(t, ctx, `document.querySelector('tr[data-group="kids"]') !== null && !document.querySelector('tr[data-group="kids"] details.edit').open`)
		kidsBlocked(days == "")
	}

	// A device known by its MAC (behind the trusted forwarder 127.0.0.2)
	// put in the group from the devices page.
	macBlocked := func(want bool) {
		t.Helper()
		out, err := exec.Command("kdig", "-b", "127.0.0.2", "@127.0.0.1", "-p", strconv.Itoa(s.dnsPort), "+timeout=5", "+retry=0", "+short",
			"+ednsopt=65001:02005e005378", "www.tiktok.com.", "A").CombinedOutput()
		if err != nil {
			t.Fatalf("kdig with add-mac: %v\n%s", err, out)
		}
		if got := strings.TrimSpace(string(out)); (got == "0.0.0.0") != want {
			t.Fatalf("TikTok from the MAC device: %q, want blocked %v", got, want)
		}
	}
	macBlocked(false)
	do(t, ctx, chromedp.Navigate(s.web+"/devices"), chromedp.WaitVisible(css("#new-devices form.in-group")),
		chromedp.Click(css(`#new-devices form.in-group button`)))
	pollLayer(t, ctx, `window.layer.state.layer.groups.some(g => g.name === "kids" && (g.devices || []).includes("02:00:5e:00:53:78"))`)
	macBlocked(true)

	for _, w := range widths {
		do(t, ctx, chromedp.EmulateViewport(w, 900))
		for _, p := range []string{"/manage", "/changes"} {
			do(t, ctx, chromedp.Navigate(s.web+p), chromedp.WaitVisible(css("h1")))
			if wide := get(t, ctx, chromedp.Evaluate[string](`document.documentElement.scrollWidth > innerWidth ? document.documentElement.scrollWidth + " > " + innerWidth : ""`)); wide != "" {
				t.Errorf("%s at %d px scrolls sideways: %s", p, w, wide)
			}
			if w == 390 && p == "/manage" {
				shot(t, ctx, "manage-phone")
			}
		}
	}
	do(t, ctx, chromedp.EmulateViewport(1000, 700))

	// The changes page's TOML, pasted into the file and reloaded.
	do(t, ctx, chromedp.Navigate(s.web+"/changes"), chromedp.WaitVisible(css("#changes")))
	shot(t, ctx, "changes-groups")
	toml := get(t, ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#changes section.change")].map(s => s.querySelector("pre").textContent).join("\n")`))
	if !strings.Contains(toml, "[[filter.groups]]") || !strings.Contains(toml, `url = "`+extra.URL+`/extra.txt"`) {
		t.Fatalf("changes page TOML:\n%s", toml)
	}
	conf := filepath.Join(s.dir, "nxdns.toml")
	f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n" + toml + "\n")
	f.Close()
	if err := s.nxdns.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// Reloaded: the layer's group is now skipped, the file has one of its name.
	pollLayer(t, ctx, `(window.layer.state.skipped || []).some(s => s.item === "group kids")`)
	// Drop every change; the page reloads after each.
	for range 10 {
		do(t, ctx, chromedp.Navigate(s.web+"/changes"), chromedp.WaitVisible(css("#changes")))
		n := get(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('#changes button[data-post^="/api/filter/layer/"]').length`))
		if n == 0 {
			break
		}
		do(t, ctx, chromedp.Click(css(`#changes button[data-post^="/api/filter/layer/"]`)))
		poll(t, ctx, `document.readyState === "complete" && document.querySelectorAll('#changes button[data-post^="/api/filter/layer/"]').length === `+strconv.Itoa(n-1))
	}
	if b, err := os.ReadFile(filepath.Join(s.dir, "dashboard-config.json")); err != nil || strings.Contains(string(b), "kids") {
		t.Fatalf("layer after dropping every change: %s %v", b, err)
	}
	for _, n := range []string{"extra.example.", "extra2.example."} {
		if got := s.lookup(t, n); got != "0.0.0.0" {
			t.Errorf("%s from the file alone: %q, want 0.0.0.0", n, got)
		}
	}
	kidsBlocked(true)
	macBlocked(true)
}

// pollLayer waits, bounded, until cond holds of window.layer, GET
// /api/filter/layer's answer, fetched again while it does not.
func pollLayer(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	poll(t, ctx, `(function () {
		if (!window.layerFetch) window.layerFetch = fetch("/api/filter/layer", {credentials: "same-origin"}).then(r => r.json()).then(j => { window.layer = j; window.layerFetch = null; });
		return !!(window.layer && (`+cond+`));
	})()`)
}
