package dashboard

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/web"
)

// dnssecDashboard is a dashboard over a fixed DNSSEC state, served on
// loopback; it returns the dashboard and its base URL.
func dnssecDashboard(t *testing.T, now time.Time, h web.DNSSECHealth, recent []dnssec.Episode, ntas []filter.NTA) (*Dashboard, string) {
	t.Helper()
	hist := history.Open(history.Options{MaxBytes: 1 << 20, MaxAge: time.Hour, Flush: time.Hour})
	t.Cleanup(func() { hist.Close() })
	health := web.Health{Listeners: web.ListenersHealth{Up: 1}, Upstreams: web.UpstreamsHealth{Enabled: 1}}.WithDNSSEC(h)
	d := New(Deps{
		History:     hist,
		Now:         func() time.Time { return now },
		Health:      func() web.Health { return health },
		DNSSECBogus: func() []dnssec.Episode { return recent },
		NTAs:        func() []filter.NTA { return ntas },
	})
	s := web.New("127.0.0.1:0", prometheus.NewRegistry(), func() web.Health { return health }, nil)
	d.Register(s)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return d, "http://" + s.Addr().String()
}

// TestBanner_dnssecWaitingAndShadowBogus: enforce waiting for the clock
// and bogus answers shadow passed on in the last day each give a warning
// line (never an error) linking to the DNSSEC page; an old bogus verdict,
// or one enforce refused, gives none (docs/dashboard.md "Status banner").
func TestBanner_dnssecWaitingAndShadowBogus(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	waiting, base := dnssecDashboard(t, now, web.DNSSECHealth{Mode: "enforce", WaitingForClock: true}, nil, nil)
	got := waiting.banner()
	if len(got) != 1 || got[0].Error || got[0].Href != "/dnssec" || !strings.Contains(got[0].Text, "waiting for this device's clock") {
		t.Errorf("enforce waiting for the clock: %+v", got)
	}
	if body := getPage(t, base+"/status/banner"); !strings.Contains(body, `<p class="degraded">Secure-DNS checks (DNSSEC) are waiting`) || !strings.Contains(body, `<a href="/dnssec">`) {
		t.Errorf("/status/banner without the line:\n%s", body)
	}

	recent := []dnssec.Episode{
		{Time: now.Add(-48 * time.Hour), Name: "old.test.", Zone: "old.test.", Reason: "expired", EDE: dns.ExtendedErrorCodeSignatureExpired},
		{Time: now.Add(-time.Hour), Name: "www.bogus.test.", Zone: "bogus.test.", Reason: "no DNSKEY", EDE: dns.ExtendedErrorCodeDNSKEYMissing},
		{Time: now.Add(-time.Minute), Name: "a.bogus.test.", Zone: "bogus.test.", Reason: "no DNSKEY", EDE: dns.ExtendedErrorCodeDNSKEYMissing},
	}
	shadow, _ := dnssecDashboard(t, now, web.DNSSECHealth{Mode: "shadow", Bogus: 3}, recent, nil)
	got = shadow.banner()
	if len(got) != 1 || got[0].Error || got[0].Href != "/dnssec" || !strings.HasPrefix(got[0].Text, "2 answers failed secure-DNS checks") || !strings.Contains(got[0].Text, "in enforce mode they would be refused") {
		t.Errorf("shadow with two bogus answers in the last day: %+v", got)
	}
	if old, _ := dnssecDashboard(t, now, web.DNSSECHealth{Mode: "shadow", Bogus: 1}, recent[:1], nil); len(old.banner()) != 0 {
		t.Errorf("shadow with a bogus answer two days old: %+v", old.banner())
	}
	if enforcing, _ := dnssecDashboard(t, now, web.DNSSECHealth{Mode: "enforce", Enforcing: true, Bogus: 3}, recent, nil); len(enforcing.banner()) != 0 {
		t.Errorf("enforcing: %+v", enforcing.banner())
	}
}

// TestDNSSECPage_listsVerdictsAndNTAsWithTheirButtons: the page says the
// mode in words, lists each recent bogus verdict newest first with a
// "stop validating ZONE for 24 h" button posting to the NTA route, and each
// running NTA with a DELETE button; the nav links to it. Names are escaped.
func TestDNSSECPage_listsVerdictsAndNTAsWithTheirButtons(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	recent := []dnssec.Episode{
		{Time: now.Add(-time.Hour), Name: "www.bogus.test.", Zone: "bogus.test.", Reason: "no DNSKEY matches the DS", EDE: dns.ExtendedErrorCodeDNSKEYMissing},
		{Time: now.Add(-time.Minute), Name: "<b>x</b>.expired.test.", Zone: "expired.test.", Reason: "signature expired", EDE: dns.ExtendedErrorCodeSignatureExpired},
		{Time: now.Add(-time.Second), Name: "evil.", Zone: ".", Reason: "root", EDE: dns.ExtendedErrorCodeDNSBogus},
	}
	ntas := []filter.NTA{{Name: "paypal.com", Until: now.Add(20 * time.Hour)}}
	_, base := dnssecDashboard(t, now, web.DNSSECHealth{Mode: "shadow", Bogus: 7}, recent, ntas)
	body := getPage(t, base+"/dnssec")
	for _, want := range []string{
		`<a href="/dnssec" aria-current="page">DNSSEC</a>`,
		`Mode <strong>shadow</strong>`,
		`7 answers failed the checks since nxdns started`,
		`<button data-post="/api/dnssec/nta" data-name="bogus.test" data-minutes="1440" data-reload="1"`,
		`>Stop validating bogus.test for 24 h</button>`,
		`>Stop validating expired.test for 24 h</button>`,
		`EDE 9 (DNSKEY Missing)`,
		`given anyway`,
		`&lt;b&gt;x&lt;/b&gt;.<wbr>expired.<wbr>test.`,
		`<button data-post="/api/dnssec/nta" data-method="DELETE" data-name="paypal.com" data-reload="1">validate again</button>`,
		// And the banner on the page itself.
		`3 answers failed secure-DNS checks`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<b>x</b>") || strings.Contains(body, `"zone"`) {
		t.Error("a name unescaped, or raw JSON, on the page")
	}
	if strings.Contains(body, `data-name=""`) || !strings.Contains(body, "zone the root") {
		t.Error("a button to stop validating the root")
	}
	if i, j := strings.Index(body, "expired.<wbr>test"), strings.Index(body, "www.<wbr>bogus"); i < 0 || j < 0 || i > j {
		t.Error("the verdicts are not newest first")
	}

	_, base = dnssecDashboard(t, now, web.DNSSECHealth{Mode: "enforce", Enforcing: true}, nil, nil)
	enforcing := getPage(t, base+"/dnssec")
	if !strings.Contains(enforcing, "Mode <strong>enforce</strong>: nxdns checks") || !strings.Contains(enforcing, "none since nxdns started") {
		t.Errorf("enforcing, nothing bogus:\n%s", enforcing)
	}
	_, base = dnssecDashboard(t, now, web.DNSSECHealth{Mode: "enforce", WaitingForClock: true}, nil, nil)
	waiting := getPage(t, base+"/dnssec")
	if !strings.Contains(waiting, "not enforcing yet: the clock of this device is not set") {
		t.Errorf("waiting for the clock:\n%s", waiting)
	}
}
