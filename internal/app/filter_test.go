package app

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
)

// TestFilter_stateSurvivesReload: a reload that leaves the lists alone keeps
// the loaded rules and a pause; one that changes them rebuilds the rules.
func TestFilter_stateSurvivesReload(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	list := filepath.Join(r.dir, "ads.txt")
	if err := os.WriteFile(list, []byte("0.0.0.0 ads.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := r.config(t, addr, false)
	cfg.Filter.Lists = append(cfg.Filter.Lists, filterList("ads", list))
	a := r.start(t, cfg)
	if !blockedVia(t, addr, "ads.example.") {
		t.Fatal("ads.example not blocked at start")
	}
	before := a.filter.Snapshot().Lists[0].Loaded
	a.filter.Pause("", time.Hour)

	cfg.Filter.BlockTTL = 30 // not a list change
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if got := a.filter.Snapshot().Lists[0].Loaded; !got.Equal(before) {
		t.Errorf("an unrelated reload reloaded the list (%v → %v)", before, got)
	}
	if blockedVia(t, addr, "ads.example.") {
		t.Error("the pause did not survive the reload")
	}
	a.filter.Resume("")
	if !blockedVia(t, addr, "ads.example.") {
		t.Error("after resume: not blocked")
	}
	cfg.Filter.Block = []string{"more.example"}
	if err := a.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if !blockedVia(t, addr, "more.example.") || !blockedVia(t, addr, "ads.example.") {
		t.Error("a list change did not rebuild the rules")
	}
}

func filterList(name, path string) config.FilterList {
	return config.FilterList{Name: name, Path: path}
}

func blockedVia(t *testing.T, addr, name string) bool {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Answer) == 1 && resp.Answer[0].(*dns.A).A.Equal(netip.MustParseAddr("0.0.0.0").AsSlice())
}

// TestFilter_listHostResolvedThroughTheRoute: a list URL's host name is
// resolved through nxdns's own route — here a forward zone to a real
// dnsmasq — at start, not through the system resolver.
func TestFilter_listHostResolvedThroughTheRoute(t *testing.T) {
	lan := testutil.StartDnsmasq(t, "127.0.0.1 lists.lan")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "0.0.0.0 remote.example\n")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.ForwardZones = append(cfg.ForwardZones, config.ForwardZone{Zone: "lan", Resolver: "udp://" + lan.Addr.String()})
	cfg.Filter.StateDir = t.TempDir()
	cfg.Filter.Lists = append(cfg.Filter.Lists, config.FilterList{Name: "remote", URL: "http://lists.lan:" + port + "/list.txt"})
	a := r.start(t, cfg)
	testutil.WaitFor(t, "the list download", 5*time.Second, func() bool { return a.filter.Snapshot().Lists[0].Rules == 1 })
	if !blockedVia(t, addr, "remote.example.") {
		t.Error("remote.example not blocked after the download")
	}
}
