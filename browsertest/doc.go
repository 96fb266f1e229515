// Package browsertest drives a real browser (Debian's chromium, headless,
// through github.com/chromedp/chromedp) against the real nxdns binary
// serving real DNS traffic: log in, read the overview, search the query
// log, perform an action, log out, and save screenshots of the main pages.
//
// It is a module of its own so that chromedp never enters nxdns's go.mod
// or the Nix vendorHash. Run it with .ci/browser.sh (which installs
// chromium and kdig) or `cd browsertest && go test ./...`; set
// NXDNS_SCREENSHOTS=DIR to write the screenshots there (docs/img).
package browsertest
