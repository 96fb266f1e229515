package app

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/fakeup"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/web"
)

// namedFake is a fake DoT upstream answering every A query with ip and
// counting the queries for one name (its probes are for other names).
type namedFake struct {
	url   string
	asked atomic.Int64
}

func startNamedFake(t *testing.T, ca *certs.CA, ip, name string) *namedFake {
	t.Helper()
	f := &namedFake{}
	l, err := fakeup.ParseListen("dot://127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Hooks = &fakeup.Hooks{Answer: func(_ context.Context, q *dns.Msg) *dns.Msg {
		m := new(dns.Msg).SetReply(q)
		if q.Question[0].Name == name {
			f.asked.Add(1)
		}
		if q.Question[0].Qtype == dns.TypeA {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.ParseIP(ip)}}
		}
		return m
	}}
	s, err := fakeup.Start(fakeup.Config{Listen: []fakeup.Listen{l}, CA: ca, CertNames: []string{"upstream.test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.url = "tls://" + s.Listeners()[0].Addr.String()
	return f
}

// askFrom asks name from the loopback source address src and returns the
// answer's one address.
func askFrom(t *testing.T, src, addr, name string) string {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second, Dialer: &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(src)}}}
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	if err != nil {
		t.Fatalf("query %s from %s: %v", name, src, err)
	}
	if len(resp.Answer) != 1 {
		t.Fatalf("query %s from %s: %v", name, src, resp)
	}
	return resp.Answer[0].(*dns.A).A.String()
}

// poolsConfig is the rig's configuration on main, plus a family upstream
// (disabled in the main pool) and the group "kids" (127.0.0.2) with
// kidsUpstreams as its own.
func (r *rig) poolsConfig(t *testing.T, addr string, main, family *namedFake, kidsUpstreams ...string) config.Config {
	t.Helper()
	cfg := r.config(t, addr, false)
	cfg.Upstreams[0].URL = main.url
	fam, off := cfg.Upstreams[0], false
	fam.URL, fam.Enabled = family.url, &off
	cfg.Upstreams = append(cfg.Upstreams, fam)
	cfg.Filter.Groups = []config.FilterGroup{{Name: "kids", Clients: []string{"127.0.0.2"}, Upstreams: kidsUpstreams}}
	if ps := config.Validate(cfg); len(ps) > 0 {
		t.Fatal(ps)
	}
	return cfg
}

// TestGroupUpstreams_routeByGroup: the group's clients are answered by the
// group's own upstream, everyone else by the main pool, each name asked
// once of each (the fakes' counters); the cache keeps them apart; the
// group pool's series carry its name.
func TestGroupUpstreams_routeByGroup(t *testing.T) {
	r := newRig(t)
	const name = "video.example."
	main := startNamedFake(t, r.ca, "198.51.100.1", name)
	family := startNamedFake(t, r.ca, "203.0.113.1", name)
	addr := loopbackAddr(t)
	a := r.start(t, r.poolsConfig(t, addr, main, family, family.url))

	for range 2 {
		if got := askFrom(t, "127.0.0.1", addr, name); got != "198.51.100.1" {
			t.Errorf("main-pool client got %s", got)
		}
		if got := askFrom(t, "127.0.0.2", addr, name); got != "203.0.113.1" {
			t.Errorf("kids client got %s, want the family upstream's answer", got)
		}
	}
	if main.asked.Load() != 1 || family.asked.Load() != 1 {
		t.Errorf("main upstream asked %d, family %d times; want 1 each", main.asked.Load(), family.asked.Load())
	}
	snaps := a.gen.Load().PoolSnapshots()
	if s, ok := snaps["kids"]; !ok || len(s.Upstreams) != 1 || s.Upstreams[0].Successes == 0 {
		t.Errorf("kids pool snapshot %+v", snaps)
	}
	for _, u := range a.gen.Load().pool.Snapshot().Upstreams {
		if u.URL == family.url {
			t.Errorf("the disabled family upstream is in the main pool")
		}
	}
}

// TestGroupUpstreams_reloadKeepsAnUnchangedPool: a reload that leaves the
// group's upstreams as they were keeps its pool (health, connections,
// counters); one that changes them builds a new one and closes the old.
func TestGroupUpstreams_reloadKeepsAnUnchangedPool(t *testing.T) {
	r := newRig(t)
	main := startNamedFake(t, r.ca, "198.51.100.1", "x.")
	family := startNamedFake(t, r.ca, "203.0.113.1", "x.")
	addr := loopbackAddr(t)
	a := r.start(t, r.poolsConfig(t, addr, main, family, family.url))
	before := a.gen.Load().groups["kids"]

	if err := a.Reload(r.poolsConfig(t, addr, main, family, family.url)); err != nil {
		t.Fatal(err)
	}
	if got := a.gen.Load().groups["kids"]; got != before {
		t.Error("an unchanged group pool was rebuilt on reload")
	}
	if err := a.Reload(r.poolsConfig(t, addr, main, family, family.url, main.url)); err != nil {
		t.Fatal(err)
	}
	after := a.gen.Load().groups["kids"]
	if after == before || len(after.pool.Snapshot().Upstreams) != 2 {
		t.Error("a changed group pool was not rebuilt")
	}
	if got := askFrom(t, "127.0.0.2", addr, "after.example."); got != "203.0.113.1" {
		t.Errorf("kids client after the reload got %s", got)
	}
	a.retired.Wait() // the old generations are closed once drained
	if before.refs.Load() != 0 {
		t.Errorf("the replaced pool still has %d references", before.refs.Load())
	}
}

// TestProbe_coversGroupUpstreams: `nxdns check --probe` asks a group's own
// upstream too (here one disabled in the main pool), once.
func TestProbe_coversGroupUpstreams(t *testing.T) {
	r := newRig(t)
	main := startNamedFake(t, r.ca, "198.51.100.1", ".")
	family := startNamedFake(t, r.ca, "203.0.113.1", ".")
	results := Probe(context.Background(), r.poolsConfig(t, loopbackAddr(t), main, family, family.url, main.url))
	if len(results) != 2 || results[0].Err != nil || results[1].Err != nil {
		t.Fatalf("results %+v, want the main upstream and the group's, both answering", results)
	}
	if main.asked.Load() != 1 || family.asked.Load() != 1 {
		t.Errorf("probes: main %d, family %d; want one each", main.asked.Load(), family.asked.Load())
	}
}

// TestGroupUpstreams_deadPoolDegradesHealth: a group whose own upstreams
// are all down makes /api/health degraded, naming the group, while the
// main pool serves.
func TestGroupUpstreams_deadPoolDegradesHealth(t *testing.T) {
	r := newRig(t)
	main := startNamedFake(t, r.ca, "198.51.100.1", "x.")
	family := startNamedFake(t, r.ca, "203.0.113.1", "x.")
	cfg := r.poolsConfig(t, loopbackAddr(t), main, family, family.url)
	cfg.Filter.Groups[0].Upstreams = []string{"tls://127.0.0.1:1"} // nothing listens on port 1
	a := r.start(t, cfg)
	testutil.WaitFor(t, "the dead group upstream's start-up probe", 10*time.Second, func() bool {
		return len(a.health().Problems) > 0
	})
	h := a.health()
	if h.Status != web.StatusDegraded || len(h.Problems) != 1 || !strings.Contains(h.Problems[0], "group kids") {
		t.Errorf("health %s %q, want degraded naming group kids", h.Status, h.Problems)
	}
}
