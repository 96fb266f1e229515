package testutil

import (
	"io"
	"net/http"
	"testing"
)

// HTTPWithHost sends method to rawURL with the given Host header (what a
// browser sends for a name that resolves to the address in rawURL, as a DNS
// rebinding page's does), on a connection of its own, and returns the
// status and body.
func HTTPWithHost(t testing.TB, method, rawURL, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
