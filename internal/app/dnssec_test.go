package app

import (
	"crypto"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nxdns/nxdns/internal/certs"
	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
)

// The DNSSEC hierarchy of issue 34, built for real on loopback: knotd
// serves and signs a test root, test. and below it a secure zone (NSEC),
// an NSEC3 zone, a bogus zone (its DS in test. matches no key), a zone
// whose signatures expired (pre-signed here), and an unsigned delegation;
// a non-validating Unbound ("iterator" only) recurses over it and serves
// DoT as nxdns's upstream, so nxdns does all the validating, from the test
// root's own trust anchor.
type dnssecWorld struct {
	ca      *certs.CA
	caFile  string
	anchors string // the trust_anchors_file
	dotURL  string
	dir     string
}

func startDNSSECWorld(t testing.TB) *dnssecWorld {
	t.Helper()
	expiredAddr, expiredDS := serveExpiredZone(t)
	zones := []testutil.KnotZone{
		{Name: ".", Sign: true, Records: `@ SOA ns.root. hostmaster.root. 1 3600 900 604800 300
@ NS ns.root.
ns.root. A 127.0.0.1
test. NS ns.test.
ns.test. A 127.0.0.1`},
		{Name: "test.", Sign: true, Records: `@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
secure NS ns.secure
ns.secure A 127.0.0.1
n3 NS ns.n3
ns.n3 A 127.0.0.1
bogus NS ns.bogus
ns.bogus A 127.0.0.1
expired NS ns.expired
ns.expired A 127.0.0.1
plain NS ns.plain
ns.plain A 127.0.0.1
` + expiredDS},
		{Name: "secure.test.", Sign: true, Records: `@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.1
alias CNAME www.n3.test.
*.wild A 192.0.2.9`},
		{Name: "n3.test.", Sign: true, NSEC3: true, Records: `@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.3
sub NS ns.sub
ns.sub A 127.0.0.1`},
		{Name: "sub.n3.test.", Records: `@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.5`},
		{Name: "bogus.test.", Sign: true, BogusDS: true, Records: `@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.66`},
		{Name: "plain.test.", Records: `@ SOA ns hostmaster 1 3600 900 604800 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.4`},
	}
	knot := testutil.StartKnot(t, zones)
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	w := &dnssecWorld{ca: ca, dir: t.TempDir()}
	w.caFile = filepath.Join(w.dir, "ca.pem")
	w.anchors = filepath.Join(w.dir, "root.keys")
	if err := os.WriteFile(w.caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(w.anchors, []byte(strings.Join(knot.DS["."], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stubs := fmt.Sprintf("stub-zone:\n\tname: \"expired.test.\"\n\tstub-addr: %s\n", strings.Replace(expiredAddr, ":", "@", 1))
	for _, z := range zones {
		stubs += fmt.Sprintf("stub-zone:\n\tname: %q\n\tstub-addr: %s\n", z.Name, strings.Replace(knot.Addr.String(), ":", "@", 1))
	}
	up := testutil.StartUnboundWith(t, ca, "upstream.test", testutil.UnboundServerBase+`	access-control: 127.0.0.0/8 allow
	do-not-query-localhost: no
	module-config: "iterator"
	qname-minimisation: no
	local-zone: "test." nodefault
	interface: 127.0.0.1@{{port}}
	tls-port: {{port}}
	tls-service-key: "{{dir}}/key.pem"
	tls-service-pem: "{{dir}}/cert.pem"
`+stubs+"remote-control:\n\tcontrol-enable: no\n")
	w.dotURL = fmt.Sprintf("tls://127.0.0.1:%d", up.Port())
	return w
}

// serveExpiredZone serves expired.test. from a small authoritative server
// on loopback (knotd serves no RRSIG it did not make): its DNSKEY set
// validly signed, its www A with a signature that expired a day ago. It
// returns the server's address and the zone's DS for test.
func serveExpiredZone(t testing.TB) (string, string) {
	t.Helper()
	key := &dns.DNSKEY{Hdr: dns.RR_Header{Name: "expired.test.", Rrtype: dns.TypeDNSKEY, Class: dns.ClassINET, Ttl: 300}, Flags: 257, Protocol: 3, Algorithm: dns.ECDSAP256SHA256}
	priv, err := key.Generate(256)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	signed := func(from, to time.Time, rr dns.RR) []dns.RR {
		sig := &dns.RRSIG{Hdr: dns.RR_Header{Name: rr.Header().Name, Rrtype: dns.TypeRRSIG, Class: dns.ClassINET, Ttl: 300},
			Algorithm: key.Algorithm, Labels: uint8(dns.CountLabel(rr.Header().Name)), OrigTtl: 300, KeyTag: key.KeyTag(), SignerName: key.Hdr.Name,
			Inception: uint32(from.Unix()), Expiration: uint32(to.Unix())}
		if err := sig.Sign(priv.(crypto.Signer), []dns.RR{rr}); err != nil {
			t.Fatal(err)
		}
		return []dns.RR{rr, sig}
	}
	a, _ := dns.NewRR("www.expired.test. 300 IN A 192.0.2.7")
	answers := map[string][]dns.RR{
		"expired.test./DNSKEY": signed(now.Add(-time.Hour), now.Add(24*time.Hour), key),
		"www.expired.test./A":  signed(now.Add(-48*time.Hour), now.Add(-24*time.Hour), a),
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg).SetReply(q)
		m.Authoritative = true
		qq := q.Question[0]
		m.Answer = answers[strings.ToLower(qq.Name)+"/"+dns.TypeToString[qq.Qtype]]
		if m.Answer == nil {
			soa, _ := dns.NewRR("expired.test. 300 IN SOA ns.expired.test. h.expired.test. 1 3600 900 604800 300")
			m.Ns = []dns.RR{soa}
		}
		if o := q.IsEdns0(); o != nil {
			m.SetEdns0(1232, o.Do())
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String(), key.ToDS(dns.SHA256).String() + "\n"
}

// nxdnsWith starts nxdns in-process on w with [dnssec] extra, its clock
// read from a timesyncd directory the test controls (set: "synchronized"
// in it).
func (w *dnssecWorld) nxdnsWith(t testing.TB, dnssecExtra string, clockSet bool, mods ...func(*config.Config)) (*App, string, string, *observerLogs) {
	t.Helper()
	addr := loopbackAddr(t)
	text := fmt.Sprintf(`[dns]
listen = [%q]
[web]
listen = ""
[log]
queries = false
[dnssec]
trust_anchors_file = %q
%s
[[upstreams]]
url = %q
tls_name = "upstream.test"
ca_file = %q
`, addr, w.anchors, dnssecExtra, w.dotURL, w.caFile)
	path := filepath.Join(t.TempDir(), "nxdns.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mods {
		m(&cfg)
	}
	timesync := t.TempDir()
	if clockSet {
		os.WriteFile(filepath.Join(timesync, "synchronized"), nil, 0o644)
	}
	logs := newObserverLogs()
	a, err := Start(cfg, Options{Logger: logs.log, Level: zap.NewAtomicLevel(), Clock: clock.NewWatcher(clock.Source{TimesyncDir: timesync}, 20*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, a) })
	return a, addr, timesync, logs
}

// askFlags asks nxdns name A with the flags given ("do", "ad", "cd").
func askFlags(t testing.TB, addr, name, flags string) *dns.Msg {
	t.Helper()
	q := new(dns.Msg).SetQuestion(name, dns.TypeA)
	q.SetEdns0(1232, strings.Contains(flags, "do"))
	q.AuthenticatedData = strings.Contains(flags, "ad")
	q.CheckingDisabled = strings.Contains(flags, "cd")
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	r, _, err := c.Exchange(q, addr)
	if err != nil {
		t.Fatalf("%s (%s): %v", name, flags, err)
	}
	return r
}

func ede(m *dns.Msg) (uint16, string, bool) {
	if o := m.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_EDE); ok {
				return e.InfoCode, e.ExtraText, true
			}
		}
	}
	return 0, "", false
}

func wantAnswer(t *testing.T, m *dns.Msg, name string, rcode int, ad bool) {
	t.Helper()
	if m.Rcode != rcode || m.AuthenticatedData != ad {
		t.Errorf("%s: rcode %s AD %v, want %s AD %v\n%v", name, dns.RcodeToString[m.Rcode], m.AuthenticatedData, dns.RcodeToString[rcode], ad, m)
	}
}

func wantServfail(t *testing.T, m *dns.Msg, name string, code uint16, zone string) {
	t.Helper()
	got, text, ok := ede(m)
	if m.Rcode != dns.RcodeServerFailure || !ok || got != code || !strings.Contains(text, zone) {
		t.Errorf("%s: rcode %s EDE %d %q (present %v), want SERVFAIL with EDE %d naming %s", name, dns.RcodeToString[m.Rcode], got, text, ok, code, zone)
	}
}

func TestDNSSECAgainstASignedHierarchy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts knotd and unbound")
	}
	w := startDNSSECWorld(t)

	t.Run("enforce", func(t *testing.T) {
		_, addr, _, _ := w.nxdnsWith(t, `mode = "enforce"`, true)
		for _, c := range []struct {
			name  string
			rcode int
		}{
			{"www.secure.test.", dns.RcodeSuccess},
			{"x.wild.secure.test.", dns.RcodeSuccess}, // wildcard, NSEC proof
			{"alias.secure.test.", dns.RcodeSuccess},  // CNAME into the NSEC3 zone
			{"nope.secure.test.", dns.RcodeNameError},
			{"www.n3.test.", dns.RcodeSuccess},
			{"nope.n3.test.", dns.RcodeNameError},
		} {
			wantAnswer(t, askFlags(t, addr, c.name, "do"), c.name+" DO", c.rcode, true)
			wantAnswer(t, askFlags(t, addr, c.name, "ad"), c.name+" AD", c.rcode, true)
			wantAnswer(t, askFlags(t, addr, c.name, ""), c.name+" without DO or AD", c.rcode, false)
		}
		if m := askFlags(t, addr, "www.secure.test.", ""); len(m.Answer) != 1 {
			t.Errorf("an answer to a client without DO carries the DNSSEC records: %v", m.Answer)
		}
		wantAnswer(t, askFlags(t, addr, "www.plain.test.", "do"), "insecure www.plain.test.", dns.RcodeSuccess, false)
		// An unsigned delegation under an NSEC3 zone, proven by its NSEC3.
		wantAnswer(t, askFlags(t, addr, "www.sub.n3.test.", "do"), "insecure www.sub.n3.test.", dns.RcodeSuccess, false)
		// NODATA, proven by NSEC and by NSEC3; the keys and DS records
		// themselves, as a validating stub asks them; the DS an unsigned
		// delegation does not have.
		for _, c := range []struct {
			name  string
			qtype uint16
		}{{"www.secure.test.", dns.TypeTXT}, {"www.n3.test.", dns.TypeTXT}, {"secure.test.", dns.TypeDNSKEY}, {"secure.test.", dns.TypeDS}, {"n3.test.", dns.TypeDS}, {"plain.test.", dns.TypeDS}} {
			name := c.name
			q := new(dns.Msg).SetQuestion(name, c.qtype)
			q.SetEdns0(1232, true)
			m, _, err := (&dns.Client{Timeout: 5 * time.Second}).Exchange(q, addr)
			if err != nil {
				t.Fatal(err)
			}
			wantAnswer(t, m, name+" "+dns.TypeToString[c.qtype], dns.RcodeSuccess, true)
		}
		wantServfail(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test.", dns.ExtendedErrorCodeDNSKEYMissing, "bogus.test")
		wantServfail(t, askFlags(t, addr, "www.expired.test.", ""), "www.expired.test.", dns.ExtendedErrorCodeSignatureExpired, "expired.test")
		// CD=1: the client validates; it gets the data, never AD.
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do,cd"), "www.bogus.test. CD", dns.RcodeSuccess, false)
	})

	t.Run("shadow passes a bogus answer and logs it", func(t *testing.T) {
		a, addr, _, logs := w.nxdnsWith(t, `mode = "shadow"`, true)
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test.", dns.RcodeSuccess, false)
		// The verdict follows the answer (docs/dnssec.md "Shadow: the
		// verdict after the answer").
		testutil.WaitFor(t, "the bogus verdict", 10*time.Second, func() bool { return a.dnssec.Snapshot().Bogus > 0 })
		if r := a.dnssec.Snapshot().Recent; len(r) == 0 || r[len(r)-1].Zone != "bogus.test." || r[len(r)-1].Enforced {
			t.Errorf("the bogus list %+v does not end with bogus.test., passed on", r)
		}
		// Secure, but answered before the verdict: no AD in shadow.
		wantAnswer(t, askFlags(t, addr, "www.secure.test.", "do"), "www.secure.test.", dns.RcodeSuccess, false)
		testutil.WaitFor(t, "the secure verdict", 10*time.Second, func() bool { return a.dnssec.Snapshot().Secure > 0 })
		if n := logs.count("DNSSEC bogus answer passed on (shadow)"); n != 1 {
			t.Errorf("%d log lines for the bogus answer, want 1", n)
		}
	})

	t.Run("a negative trust anchor restores the name", func(t *testing.T) {
		_, addr, _, _ := w.nxdnsWith(t, "mode = \"enforce\"\nnegative_trust_anchors = [\"bogus.test\"]", true)
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test. under an NTA", dns.RcodeSuccess, false)
		wantServfail(t, askFlags(t, addr, "www.expired.test.", "do"), "www.expired.test.", dns.ExtendedErrorCodeSignatureExpired, "expired.test")
	})

	t.Run("a negative trust anchor from the dashboard restores the name", func(t *testing.T) {
		a, addr, _, _ := w.nxdnsWith(t, `mode = "enforce"`, true)
		wantServfail(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test.", dns.ExtendedErrorCodeDNSKEYMissing, "bogus.test")
		if _, err := a.filter.AddNTA("bogus.test", time.Hour); err != nil {
			t.Fatal(err)
		}
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test. under a dashboard NTA", dns.RcodeSuccess, false)
	})

	t.Run("the query log's button stops validating the zone", func(t *testing.T) {
		webPort := testutil.FreePort(t)
		a, addr, _, _ := w.nxdnsWith(t, `mode = "enforce"`, true, func(c *config.Config) { c.Web.Listen = fmt.Sprintf("127.0.0.1:%d", webPort) })
		wantServfail(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test.", dns.ExtendedErrorCodeDNSKEYMissing, "bogus.test")
		testutil.WaitFor(t, "the history to hold the query", 5*time.Second, func() bool { return historyRows(t, a) >= 1 })
		base := fmt.Sprintf("http://127.0.0.1:%d", webPort)
		page := get(t, base+"/queries?name=bogus", http.StatusOK)
		if !strings.Contains(page, `data-post="/api/dnssec/nta" data-name="bogus.test" data-minutes="1440"`) {
			t.Fatalf("the query log offers no NTA for bogus.test:\n%s", page)
		}
		resp, err := http.Post(base+"/api/dnssec/nta?name=bogus.test&minutes=1440", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/dnssec/nta: %d", resp.StatusCode)
		}
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test. after the button", dns.RcodeSuccess, false)
	})

	t.Run("the DNSSEC page lists shadow's bogus answers and the NTA its button sets", func(t *testing.T) {
		webPort := testutil.FreePort(t)
		a, addr, _, _ := w.nxdnsWith(t, `mode = "shadow"`, true, func(c *config.Config) { c.Web.Listen = fmt.Sprintf("127.0.0.1:%d", webPort) })
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test.", dns.RcodeSuccess, false)
		testutil.WaitFor(t, "the bogus verdict", 10*time.Second, func() bool { return a.dnssec.Snapshot().Bogus > 0 })
		base := fmt.Sprintf("http://127.0.0.1:%d", webPort)
		if b := get(t, base+"/status/banner", http.StatusOK); !strings.Contains(b, "1 answer failed secure-DNS checks") || !strings.Contains(b, `href="/dnssec"`) {
			t.Errorf("the banner does not tell of the bogus answer:\n%s", b)
		}
		page := get(t, base+"/dnssec", http.StatusOK)
		if !strings.Contains(page, `data-post="/api/dnssec/nta" data-name="bogus.test" data-minutes="1440"`) || !strings.Contains(page, "given anyway") {
			t.Fatalf("the DNSSEC page offers no NTA for bogus.test:\n%s", page)
		}
		resp, err := http.Post(base+"/api/dnssec/nta?name=bogus.test&minutes=1440", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if page := get(t, base+"/dnssec", http.StatusOK); !strings.Contains(page, `data-post="/api/dnssec/nta" data-method="DELETE" data-name="bogus.test"`) {
			t.Errorf("the DNSSEC page does not list the NTA set:\n%s", page)
		}
	})

	t.Run("a validated forward zone's DS comes from its parent", func(t *testing.T) {
		// plain.test. forwarded to a server authoritative for it alone, as a
		// router is for its own zone: the DS lives in test., which proves
		// the delegation unsigned; the zone's own server has no say in it.
		child := serveChildOnly(t, "plain.test.", "www.plain.test. 300 IN A 192.0.2.4")
		yes := true
		_, addr, _, _ := w.nxdnsWith(t, `mode = "enforce"`, true, func(c *config.Config) {
			c.ForwardZones = append(c.ForwardZones, config.ForwardZone{Zone: "plain.test", Resolver: "udp://" + child, Validate: &yes})
		})
		wantAnswer(t, askFlags(t, addr, "www.plain.test.", "do"), "www.plain.test. through its validated forward zone", dns.RcodeSuccess, false)
	})

	t.Run("enforce waits for the clock", func(t *testing.T) {
		webPort := testutil.FreePort(t)
		a, addr, timesync, _ := w.nxdnsWith(t, `mode = "enforce"`, false, func(c *config.Config) { c.Web.Listen = fmt.Sprintf("127.0.0.1:%d", webPort) })
		wantAnswer(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test. before the clock is set", dns.RcodeSuccess, false)
		if h := a.health(); h.DNSSEC == nil || !h.DNSSEC.WaitingForClock || h.DNSSEC.Enforcing {
			t.Errorf("/api/health dnssec %+v, want waiting for the clock", h.DNSSEC)
		}
		if b := get(t, fmt.Sprintf("http://127.0.0.1:%d/status/banner", webPort), http.StatusOK); !strings.Contains(b, "waiting for this device&#39;s clock") {
			t.Errorf("the banner does not say enforce waits for the clock:\n%s", b)
		}
		if err := os.WriteFile(filepath.Join(timesync, "synchronized"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, "enforce to begin", 5*time.Second, func() bool { return a.health().DNSSEC.Enforcing })
		wantServfail(t, askFlags(t, addr, "www.bogus.test.", "do"), "www.bogus.test. once the clock is set", dns.ExtendedErrorCodeDNSKEYMissing, "bogus.test")
	})
}

// observerLogs is a logger whose lines the test counts.
type observerLogs struct {
	log *zap.Logger
	obs *observer.ObservedLogs
}

func newObserverLogs() *observerLogs {
	core, obs := observer.New(zap.InfoLevel)
	return &observerLogs{log: zap.New(core), obs: obs}
}

func (o *observerLogs) count(msg string) int { return o.obs.FilterMessage(msg).Len() }

// TestDNSSEC_cacheFileFromAnotherModeIsNotServed: answers saved in the
// cache file under mode off carry the upstream's AD; a restart in shadow
// drops them, a restart in the same mode keeps them (the file's
// .dnssec-mode marker).
func TestDNSSEC_cacheFileFromAnotherModeIsNotServed(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.DNS.CacheFile = filepath.Join(t.TempDir(), "cache.bin")
	run := func(mode string, query bool) int {
		t.Helper()
		c := cfg
		c.DNSSEC.Mode = mode
		a, err := Start(c, Options{Logger: r.log, Level: zap.NewAtomicLevel()})
		if err != nil {
			t.Fatal(err)
		}
		n := a.cache.Snapshot().Entries
		if query {
			ask(t, addr, "kept.example.")
		}
		shutdown(t, a)
		return n
	}
	run(config.DNSSECOff, true)
	if n := run(config.DNSSECOff, false); n != 1 {
		t.Fatalf("a restart in the same mode loaded %d entries, want 1", n)
	}
	if n := run(config.DNSSECShadow, false); n != 0 {
		t.Fatalf("a restart in shadow loaded %d entries stored under off, want 0", n)
	}
}

// TestDNSSEC_crashAfterAModeChangeServesNoOldEntries: a start in a new mode
// records that mode beside the cache file at once, but the file is next
// written minutes later; a crash (a Pi unplugged, a crash loop) in between
// must not leave the old mode's entries under the new mode's marker.
func TestDNSSEC_crashAfterAModeChangeServesNoOldEntries(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.DNS.CacheFile = filepath.Join(t.TempDir(), "cache.bin")
	cfg.DNSSEC.Mode = config.DNSSECOff
	a := startCached(t, r, cfg, nil)
	ask(t, addr, "kept.example.")
	shutdown(t, a)
	cfg.DNSSEC.Mode = config.DNSSECShadow
	a = startCached(t, r, cfg, nil)
	crashed := diskNow(t, cfg.DNS.CacheFile) // what the disk holds if the machine stops now
	shutdown(t, a)
	crashed()
	a = startCached(t, r, cfg, nil)
	defer shutdown(t, a)
	if n := a.cache.Snapshot().Entries; n != 0 {
		t.Fatalf("after a crash following the change to shadow, %d entries stored under off were loaded, want 0", n)
	}
}

// TestDNSSEC_crashAfterTheClockIsSetServesNoShadowEntries: enforce waits
// for the clock, storing what it passed on meanwhile; once the clock is
// set the cache is emptied, and the cache file must not keep those
// entries for the next start until its next save.
func TestDNSSEC_crashAfterTheClockIsSetServesNoShadowEntries(t *testing.T) {
	r := newRig(t)
	addr := loopbackAddr(t)
	cfg := r.config(t, addr, false)
	cfg.DNS.CacheFile = filepath.Join(t.TempDir(), "cache.bin")
	cfg.DNSSEC.Mode = config.DNSSECEnforce
	timesync := t.TempDir()
	watcher := func() *clock.Watcher {
		return clock.NewWatcher(clock.Source{TimesyncDir: timesync}, 20*time.Millisecond)
	}
	a := startCached(t, r, cfg, watcher())
	ask(t, addr, "kept.example.")
	shutdown(t, a) // saved while enforce waited for the clock
	a = startCached(t, r, cfg, watcher())
	if n := a.cache.Snapshot().Entries; n != 1 {
		t.Fatalf("a restart with the clock still unset loaded %d entries, want 1", n)
	}
	if err := os.WriteFile(filepath.Join(timesync, "synchronized"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "enforce to begin", 5*time.Second, func() bool { return a.cache.Snapshot().Entries == 0 })
	crashed := diskNow(t, cfg.DNS.CacheFile)
	shutdown(t, a)
	crashed()
	a = startCached(t, r, cfg, watcher())
	defer shutdown(t, a)
	if n := a.cache.Snapshot().Entries; n != 0 {
		t.Fatalf("after a crash once the clock was set, %d entries stored before it were loaded, want 0", n)
	}
}

// startCached starts nxdns on cfg, with the clock watcher given (nil: the
// system's).
func startCached(t *testing.T, r *rig, cfg config.Config, w *clock.Watcher) *App {
	t.Helper()
	a, err := Start(cfg, Options{Logger: r.log, Level: zap.NewAtomicLevel(), Clock: w})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// diskNow reads path as a crash now would leave it, and returns what puts
// it back so after a clean shutdown has written it.
func diskNow(t *testing.T, path string) func() {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err != nil {
			os.Remove(path)
			return
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// serveChildOnly is an authoritative server on loopback for zone alone,
// unsigned: the one record given, and NODATA or NXDOMAIN with the zone's
// SOA for anything else (a DS query included, as the child side answers
// it). It returns its address.
func serveChildOnly(t testing.TB, zone, record string) string {
	t.Helper()
	rec, err := dns.NewRR(record)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	soa, _ := dns.NewRR(zone + " 300 IN SOA ns." + zone + " h." + zone + " 1 3600 900 604800 300")
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg).SetReply(q)
		m.Authoritative = true
		qq := q.Question[0]
		switch {
		case strings.EqualFold(qq.Name, rec.Header().Name) && qq.Qtype == rec.Header().Rrtype:
			m.Answer = []dns.RR{rec}
		case !strings.EqualFold(qq.Name, rec.Header().Name) && !strings.EqualFold(qq.Name, zone):
			m.Rcode = dns.RcodeNameError
			m.Ns = []dns.RR{soa}
		default:
			m.Ns = []dns.RR{soa}
		}
		if o := q.IsEdns0(); o != nil {
			m.SetEdns0(1232, o.Do())
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return pc.LocalAddr().String()
}
