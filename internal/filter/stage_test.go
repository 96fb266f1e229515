package filter

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// next stands for the cache and the route: it counts what reaches it and
// answers with a CNAME when cname is set.
type next struct {
	got   int
	cname string
}

func (n *next) Answer(_ context.Context, r *query.Request) (*dns.Msg, error) {
	n.got++
	resp := new(dns.Msg)
	resp.SetReply(r.Msg)
	q := r.Msg.Question[0]
	if n.cname != "" {
		resp.Answer = append(resp.Answer, &dns.CNAME{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: n.cname})
	}
	resp.Answer = append(resp.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: []byte{192, 0, 2, 1}})
	return resp, nil
}

func writeList(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// rig is an engine over path lists in a temporary directory.
func newEngine(t *testing.T, cfg config.Filter) *Engine {
	t.Helper()
	e := New(Options{})
	t.Cleanup(e.Close)
	e.Update(cfg)
	return e
}

func filterCfg(t *testing.T) config.Config {
	t.Helper()
	dir := t.TempDir()
	f := config.FilterDefaults()
	f.Lists = []config.FilterList{
		{Name: "ads", Path: writeList(t, dir, "ads.txt", "0.0.0.0 ads.example\n||tracker.example^\n")},
		{Name: "allow", Path: writeList(t, dir, "allow.txt", "ok.tracker.example\n"), Kind: "allow"},
		{Name: "games", Path: writeList(t, dir, "games.txt", "||games.example^\n")},
	}
	f.Block = []string{"||inline.example^"}
	f.Allow = []string{"||good.ads.example^"}
	f.Groups = []config.FilterGroup{
		{Name: "default", Lists: []string{"ads", "allow"}},
		{Name: "kids", Clients: []string{"192.168.1.30"}, Lists: []string{"ads", "allow", "games"}},
	}
	return config.Config{Filter: f}
}

func ask(t *testing.T, s *Stage, n *next, client, name string, qtype uint16) (*dns.Msg, *query.Event) {
	t.Helper()
	ev := &query.Event{Client: netip.MustParseAddr(client)}
	resp, err := s.Answer(context.Background(), &query.Request{Msg: new(dns.Msg).SetQuestion(name, qtype), Event: ev}, n)
	if err != nil {
		t.Fatal(err)
	}
	return resp, ev
}

func ede(m *dns.Msg) *dns.EDNS0_EDE {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				return e
			}
		}
	}
	return nil
}

func TestStage_blockedNeverForwarded(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	n := &next{}
	resp, ev := ask(t, s, n, "192.168.1.5", "x.Tracker.example.", dns.TypeA)
	if n.got != 0 {
		t.Fatal("a blocked query was forwarded")
	}
	if ev.Source != query.SourceBlocked || !ev.Filter.Blocked || ev.Filter.List != "ads" || ev.Filter.Rule != "||tracker.example^" || ev.Filter.Group != "default" {
		t.Errorf("event %+v %+v", ev.Source, ev.Filter)
	}
	if len(resp.Answer) != 1 || !resp.Answer[0].(*dns.A).A.Equal([]byte{0, 0, 0, 0}) || resp.Answer[0].Header().Ttl != 60 {
		t.Errorf("null answer %v", resp.Answer)
	}
	if x := ede(resp); x == nil || x.InfoCode != dns.ExtendedErrorCodeBlocked || x.ExtraText != "list ads rule ||tracker.example^" {
		t.Errorf("EDE %+v", x)
	}
	resp, _ = ask(t, s, n, "192.168.1.5", "ads.example.", dns.TypeAAAA)
	if len(resp.Answer) != 1 || resp.Answer[0].(*dns.AAAA).AAAA.String() != "::" {
		t.Errorf("AAAA %v", resp.Answer)
	}
	resp, _ = ask(t, s, n, "192.168.1.5", "ads.example.", dns.TypeMX)
	if len(resp.Answer) != 0 || resp.Rcode != dns.RcodeSuccess || len(resp.Ns) != 1 {
		t.Errorf("MX: %v", resp)
	}
	if n.got != 0 {
		t.Errorf("%d blocked queries forwarded", n.got)
	}
	if got := e.Snapshot().Lists[0].Blocked; got != 3 {
		t.Errorf("blocked counter %d, want 3", got)
	}
}

func TestStage_blockResponses(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	for _, tc := range []struct {
		response string
		rcode    int
	}{{config.ResponseNXDomain, dns.RcodeNameError}, {config.ResponseRefused, dns.RcodeRefused}} {
		cfg.Filter.BlockResponse, cfg.Filter.BlockTTL = tc.response, 30
		s := e.NewStage(cfg, time.UTC)
		resp, _ := ask(t, s, &next{}, "192.168.1.5", "ads.example.", dns.TypeA)
		if resp.Rcode != tc.rcode || len(resp.Answer) != 0 || ede(resp) == nil {
			t.Errorf("%s: %v", tc.response, resp)
		}
		if tc.response == config.ResponseNXDomain && (len(resp.Ns) != 1 || resp.Ns[0].(*dns.SOA).Minttl != 30) {
			t.Errorf("nxdomain: SOA %v", resp.Ns)
		}
	}
}

func TestStage_allowedAndOtherNamesPassOn(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	for _, name := range []string{"ok.tracker.example.", "good.ads.example.", "example.org.", "games.example."} {
		n := &next{}
		_, ev := ask(t, s, n, "192.168.1.5", name, dns.TypeA)
		if n.got != 1 || ev.Source == query.SourceBlocked {
			t.Errorf("%s: forwarded %d, source %q", name, n.got, ev.Source)
		}
	}
	// Inline block rules apply to every client.
	_, ev := ask(t, s, &next{}, "192.168.1.5", "a.inline.example.", dns.TypeA)
	if ev.Filter.List != InlineList {
		t.Errorf("inline: %+v", ev.Filter)
	}
}

func TestStage_groupListsOnlyForTheirClients(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	_, ev := ask(t, s, &next{}, "192.168.1.30", "games.example.", dns.TypeA)
	if !ev.Filter.Blocked || ev.Filter.Group != "kids" || ev.Filter.List != "games" {
		t.Errorf("kid: %+v", ev.Filter)
	}
	_, ev = ask(t, s, &next{}, "192.168.1.31", "games.example.", dns.TypeA)
	if ev.Filter.Blocked {
		t.Errorf("a default client got the kids' list: %+v", ev.Filter)
	}
}

func TestStage_cnameCloaking(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	n := &next{cname: "metrics.tracker.example."}
	resp, ev := ask(t, s, n, "192.168.1.5", "stats.news.example.", dns.TypeA)
	if n.got != 1 {
		t.Fatalf("forwarded %d, want 1 (the name itself is not blocked)", n.got)
	}
	if !ev.Filter.Blocked || ev.Source != query.SourceBlocked || ev.Filter.Rule != "||tracker.example^" {
		t.Errorf("cloaked answer not blocked: %+v", ev.Filter)
	}
	if len(resp.Answer) != 1 || resp.Answer[0].Header().Rrtype != dns.TypeA || !resp.Answer[0].(*dns.A).A.Equal([]byte{0, 0, 0, 0}) {
		t.Errorf("answer %v", resp.Answer)
	}
	// An allowed CNAME target passes.
	n = &next{cname: "ok.tracker.example."}
	_, ev = ask(t, s, n, "192.168.1.5", "site.example.", dns.TypeA)
	if ev.Filter.Blocked {
		t.Error("an allowlisted CNAME target was blocked")
	}
}

// Passes, given a cached answer's CNAME targets, agrees with Answer given
// the same answer: a blocked target (in whatever case the answer spells
// it) fails the fast path, an allowlisted one and none at all pass it.
func TestStage_passesAgreesOnCNAMETargets(t *testing.T) {
	cfg := filterCfg(t)
	e := newEngine(t, cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	for _, c := range []struct {
		name   string
		cnames []string
	}{
		{"stats.news.example.", []string{"metrics.tracker.example."}},
		{"stats.news.example.", []string{"cdn.example.", "Metrics.TRACKER.example."}},
		{"site.example.", []string{"ok.tracker.example."}},
		{"site.example.", nil},
		{"x.tracker.example.", nil},
	} {
		var target string
		if len(c.cnames) > 0 {
			target = c.cnames[len(c.cnames)-1]
		}
		_, answered := ask(t, s, &next{cname: target}, "192.168.1.5", c.name, dns.TypeA)
		ev := &query.Event{Client: netip.MustParseAddr("192.168.1.5"), Name: c.name, Qtype: dns.TypeA, Qclass: dns.ClassINET}
		if got, want := s.Passes(ev, c.cnames), !answered.Filter.Blocked; got != want {
			t.Errorf("%s via %v: Passes %v, but Answer blocked=%v", c.name, c.cnames, got, answered.Filter.Blocked)
		}
	}
}

func TestStage_pauseAndCheck(t *testing.T) {
	cfg := filterCfg(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	_, s, mux := clockedAPI(t, cfg, &clock)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(method, path string) string {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	body := get("GET", "/api/filter/check?name=x.tracker.example&client=192.168.1.5")
	for _, want := range []string{`"blocked":true`, `"list":"ads"`, `"rule":"||tracker.example^"`, `"group":"default"`} {
		if !strings.Contains(body, want) {
			t.Errorf("check: %s lacks %s", body, want)
		}
	}
	body = get("GET", "/api/filter/check?name=ok.tracker.example")
	if !strings.Contains(body, `"allowlisted":true`) || !strings.Contains(body, `"list":"allow"`) {
		t.Errorf("check allowlisted: %s", body)
	}
	for _, bad := range []string{"0", "-5", "abc", "99999999999999999999", "1e3"} {
		if b := get("POST", "/api/filter/pause?minutes="+bad); !strings.Contains(b, "error") {
			t.Errorf("minutes=%s accepted: %s", bad, b)
		}
	}
	get("POST", "/api/filter/pause?minutes=5&client=192.168.1.5")
	n := &next{}
	_, ev := ask(t, s, n, "192.168.1.5", "ads.example.", dns.TypeA)
	if n.got != 1 || ev.Filter.Blocked {
		t.Error("a paused client was filtered")
	}
	n = &next{}
	ask(t, s, n, "192.168.1.6", "ads.example.", dns.TypeA)
	if n.got != 0 {
		t.Error("another client's pause let this one through")
	}
	if b := get("GET", "/api/filter/check?name=ads.example&client=192.168.1.5"); !strings.Contains(b, `"paused":true`) {
		t.Errorf("check paused: %s", b)
	}
	// The pause expires by itself.
	clock.Add(int64(5 * time.Minute))
	n = &next{}
	ask(t, s, n, "192.168.1.5", "ads.example.", dns.TypeA)
	if n.got != 0 {
		t.Error("the pause outlived its minutes")
	}
	get("POST", "/api/filter/pause?minutes=5")
	n = &next{}
	ask(t, s, n, "192.168.1.9", "ads.example.", dns.TypeA)
	if n.got != 1 {
		t.Error("a global pause did not pause every client")
	}
	get("POST", "/api/filter/resume")
	n = &next{}
	ask(t, s, n, "192.168.1.9", "ads.example.", dns.TypeA)
	if n.got != 0 {
		t.Error("resume did not end the pause")
	}
}

func TestBits_renamedListsNeverExhaustTheBits(t *testing.T) {
	e := New(Options{})
	defer e.Close()
	for i := range 200 {
		bits := e.Bits([]config.FilterList{{Name: fmt.Sprintf("list%d", i)}})
		if _, ok := bits[fmt.Sprintf("list%d", i)]; !ok {
			t.Fatalf("reload %d: the renamed list got no bit", i)
		}
	}
}

// clockedAPI is an engine on the settable clock, its stage for cfg, and
// the filter's routes on a mux.
func clockedAPI(t *testing.T, cfg config.Config, clock *atomic.Int64) (*Engine, *Stage, *http.ServeMux) {
	t.Helper()
	e := New(Options{Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	t.Cleanup(e.Close)
	e.Update(cfg.Filter)
	s := e.NewStage(cfg, time.UTC)
	mux := http.NewServeMux()
	for _, r := range e.Routes(func() *Stage { return s }) {
		mux.Handle(r.Pattern, r.Handler)
	}
	return e, s, mux
}
