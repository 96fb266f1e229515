package filter

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
)

// TestNTA_coversTheSubtreeUntilItEndsAndSurvivesARestart: a dashboard NTA
// covers its name and the names below, any case, with or without the dot;
// it ends by itself; it is read back from the state directory by a new
// engine; removing it ends it.
func TestNTA_coversTheSubtreeUntilItEndsAndSurvivesARestart(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).Unix())
	clock := func() time.Time { return time.Unix(now.Load(), 0) }
	dir := t.TempDir()
	newE := func() *Engine {
		e := New(Options{Now: clock})
		t.Cleanup(e.Close)
		e.Update(config.Filter{StateDir: dir})
		return e
	}
	e := newE()
	nta, err := e.AddNTA("PayPal.com.", 24*time.Hour)
	if err != nil || nta.Name != "paypal.com" {
		t.Fatalf("AddNTA = %+v, %v", nta, err)
	}
	for name, want := range map[string]bool{"paypal.com.": true, "www.PAYPAL.com": true, "paypal.com.evil.": false, "com.": false} {
		if got := e.NTAActive(name); got != want {
			t.Errorf("NTAActive(%s) = %v, want %v", name, got, want)
		}
	}
	restarted := newE()
	if got := restarted.NTAs(); len(got) != 1 || got[0].Name != "paypal.com" || !got[0].Until.Equal(nta.Until) {
		t.Fatalf("after a restart: %+v, want paypal.com until %v", got, nta.Until)
	}
	now.Add(int64(25 * time.Hour / time.Second))
	if restarted.NTAActive("paypal.com") || len(restarted.NTAs()) != 0 {
		t.Error("an NTA outlived its end")
	}
	now.Store(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC).Unix())
	if found, err := restarted.RemoveNTA("paypal.com"); !found || err != nil {
		t.Fatalf("RemoveNTA = %v, %v", found, err)
	}
	if newE().NTAActive("paypal.com") {
		t.Error("a removed NTA came back after a restart")
	}
	if _, err := e.AddNTA("not a name!", time.Hour); err == nil {
		t.Error("a bad name was taken")
	}
	b, _ := os.ReadFile(filepath.Join(dir, NTAFile))
	if strings.Contains(string(b), "paypal") {
		t.Errorf("the file still names the removed NTA:\n%s", b)
	}
}

func TestNTA_api(t *testing.T) {
	e := New(Options{})
	t.Cleanup(e.Close)
	mux := http.NewServeMux()
	for _, r := range e.Routes(func() *Stage { return nil }) {
		mux.Handle(r.Pattern, r.Handler)
	}
	do := func(method, target string) (int, string) {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w.Code, w.Body.String()
	}
	if code, body := do("POST", "/api/dnssec/nta?name=bank.example&hours=2"); code != 200 || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("POST: %d %s", code, body)
	}
	code, body := do("GET", "/api/dnssec/nta")
	var list []NTA
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list) != 1 || time.Until(list[0].Until) > 2*time.Hour {
		t.Fatalf("GET: %d %s", code, body)
	}
	for _, bad := range []string{"/api/dnssec/nta?name=x..y", "/api/dnssec/nta?name=a.example&hours=500", "/api/dnssec/nta?name=a.example&hours=-1"} {
		if code, _ := do("POST", bad); code != 400 {
			t.Errorf("POST %s: %d, want 400", bad, code)
		}
	}
	if code, body := do("DELETE", "/api/dnssec/nta?name=bank.example"); code != 200 || !strings.Contains(body, `"changed":true`) {
		t.Fatalf("DELETE: %d %s", code, body)
	}
}
