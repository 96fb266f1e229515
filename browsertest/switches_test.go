package browsertest

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowser_groupsPageSwitchesTikTokOffForTheKids: a parent logs in,
// opens the groups page, turns TikTok's switch on for the kids' group
// (the laptop at 127.0.0.1), and kdig from that device is blocked at once;
// "reset" goes back to the configuration and kdig is answered again.
func TestBrowser_groupsPageSwitchesTikTokOffForTheKids(t *testing.T) {
	s := newStack(t, `[[filter.groups]]
name = "kids"
clients = ["127.0.0.1"]
lists = ["ads"]
safe_search = ["google"]
`)
	if got := s.lookup(t, "www.tiktok.com"); got == "0.0.0.0" {
		t.Fatal("TikTok blocked before the switch")
	}
	ctx := browserCtx(t)
	do(t, ctx, chromedp.Navigate(s.web+"/groups"), chromedp.WaitVisible(css("#password")),
		chromedp.SendKeys(css("#password"), "household secret"), chromedp.Submit(css("#password")),
		chromedp.WaitVisible(css(".group")))
	if loc := get(t, ctx, chromedp.Location()); !strings.HasSuffix(loc, "/groups") {
		do(t, ctx, chromedp.Navigate(s.web+"/groups"), chromedp.WaitVisible(css(".group")))
	}
	tiktok := `button[data-switch="service"][data-id="tiktok"][data-state="on"]`
	if label := get(t, ctx, chromedp.Text(css(tiktok))); label != "TikTok: allowed" {
		t.Fatalf("TikTok's switch says %q", label)
	}
	if google := get(t, ctx, chromedp.Text(css(`button[data-switch="safe_search"][data-id="google"]`))); google != "google: forced" {
		t.Fatalf("google's switch says %q", google)
	}
	shot(t, ctx, "groups")
	// The click posts the switch and reloads the page with it in force.
	do(t, ctx, chromedp.Click(css(tiktok)), chromedp.WaitVisible(css(`button[data-id="tiktok"][data-state="config"]`)))
	if label := get(t, ctx, chromedp.Text(css(`button[data-switch="service"][data-id="tiktok"][data-state="off"]`))); label != "TikTok: blocked" {
		t.Fatalf("after the click TikTok's switch says %q", label)
	}
	if got := s.lookup(t, "www.tiktok.com"); got != "0.0.0.0" {
		t.Fatalf("kdig www.tiktok.com after the switch: %q, want 0.0.0.0", got)
	}
	do(t, ctx, chromedp.Click(css(`button[data-id="tiktok"][data-state="config"]`)), chromedp.WaitVisible(css(tiktok)))
	if got := s.lookup(t, "www.tiktok.com"); got == "0.0.0.0" {
		t.Fatal("TikTok still blocked after reset")
	}
}
