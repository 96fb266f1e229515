package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/fakeup"
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

// TestFilter_listHostsResolvedLocallyFirst: list hosts go through the
// chain below the filter, local answers first: http://localhost:PORT and
// a name of local.records are fetched from this machine, and neither name
// (nor any special-use name, even with local.forward_private) reaches the
// upstream — which would answer every name with an address no list server
// is on.
func TestFilter_listHostsResolvedLocallyFirst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "0.0.0.0 %s.example\n", strings.Trim(r.URL.Path, "/"))
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := newRig(t)
	var mu sync.Mutex
	var asked []string
	up, err := fakeup.ParseListen("dot://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up.Hooks = &fakeup.Hooks{Answer: func(_ context.Context, q *dns.Msg) *dns.Msg {
		mu.Lock()
		asked = append(asked, q.Question[0].Name)
		mu.Unlock()
		m := new(dns.Msg).SetReply(q)
		if q.Question[0].Qtype == dns.TypeA { // loopback, where no list server listens
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(127, 0, 0, 9)})
		}
		return m
	}}
	fake, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{up}, CA: r.ca, CertNames: []string{"upstream.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.Upstreams[0].URL = "tls://" + fake.Listeners()[0].Addr.String()
	cfg.Local.Records = []string{"lists.home.arpa. A 127.0.0.1"}
	cfg.Local.ForwardPrivate = true
	cfg.Filter.StateDir = t.TempDir()
	cfg.Filter.Lists = append(cfg.Filter.Lists,
		config.FilterList{Name: "viaLocalhost", URL: "http://localhost:" + port + "/one"},
		config.FilterList{Name: "viaRecord", URL: "http://lists.home.arpa:" + port + "/two"},
		config.FilterList{Name: "special", URL: "http://nas.home.arpa:" + port + "/three"})
	a := r.start(t, cfg)
	testutil.WaitFor(t, "the list downloads", 10*time.Second, func() bool {
		l := a.filter.Snapshot().Lists
		return l[0].Rules == 1 && l[1].Rules == 1 && (l[2].Error != "" || l[2].Rules > 0)
	})
	if l := a.filter.Snapshot().Lists[2]; !strings.Contains(l.Error, "NXDOMAIN") {
		t.Errorf("a special-use list host without a local record: %+v", l)
	}
	if !blockedVia(t, addr, "one.example.") || !blockedVia(t, addr, "two.example.") {
		t.Error("the lists fetched from this machine do not block")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range asked {
		if strings.Contains(name, "localhost") || strings.Contains(name, "home.arpa") {
			t.Errorf("the upstream was asked %s", name)
		}
	}
}
