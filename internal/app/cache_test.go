package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestReload_keepsTheCache: the cache belongs to the App, so a reload with
// the same cache settings answers a name cached before it without asking
// the upstream; one that changes dns.cache_size starts empty.
func TestReload_keepsTheCache(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	a := r.start(t, r.config(t, addr, false))
	ask(t, addr, "kept.example.")

	if err := a.Reload(r.config(t, addr, false)); err != nil {
		t.Fatal(err)
	}
	// Counted by the cache, not the upstream: each new pool sends a start-up
	// probe at a moment of its own.
	before := a.cache.Snapshot()
	ask(t, addr, "kept.example.")
	if got := a.cache.Snapshot(); got.Hits != before.Hits+1 || got.Misses != before.Misses {
		t.Errorf("after a reload: %+v → %+v, want one more hit: the cache did not survive", before, got)
	}

	cfg := r.config(t, addr, false)
	cfg.DNS.CacheSize = 5000
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	before = a.cache.Snapshot()
	ask(t, addr, "kept.example.")
	if got := a.cache.Snapshot(); got.Misses != before.Misses+1 {
		t.Errorf("after dns.cache_size changed: %+v → %+v, want one more miss (emptied cache)", before, got)
	}
}

func TestCacheAPI_onLoopbackWeb(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	web := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.Web.Listen = web
	a := r.start(t, cfg)
	ask(t, addr, "api.example.")
	hc := &http.Client{}
	defer hc.CloseIdleConnections() // goleak: no keep-alive left behind

	resp, err := hc.Get(fmt.Sprintf("http://%s/api/cache/entry?name=api.example&type=A", web))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Entries []struct{ State, Via string } }
	err = json.NewDecoder(resp.Body).Decode(&out)
	resp.Body.Close()
	if err != nil || len(out.Entries) != 1 || out.Entries[0].State != "fresh" || out.Entries[0].Via != "pool" {
		t.Fatalf("entry: %+v (%v), want one fresh entry via the pool", out, err)
	}
	resp, err = hc.Get(fmt.Sprintf("http://%s/api/cache/flush", web))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET flush: %v, want 405 (POST only)", resp.Status)
	}
	resp, err = hc.Post(fmt.Sprintf("http://%s/api/cache/flush?name=example", web), "", strings.NewReader(""))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("flush: %v %v", resp, err)
	}
	resp.Body.Close()
	before := a.cache.Snapshot()
	ask(t, addr, "api.example.")
	if got := a.cache.Snapshot(); got.Misses != before.Misses+1 {
		t.Errorf("after the flush: %+v → %+v, want one more miss", before, got)
	}
}
