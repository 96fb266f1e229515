package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestGuards_defaults: rebinding protection is on, answering SERVFAIL, and
// the rate limit is on with a burst far above a phone's wake-up burst, the
// host itself exempt.
func TestGuards_defaults(t *testing.T) {
	c := mustLoad(t, "[[upstreams]]\nurl = \"tls://9.9.9.9\"\n")
	if !c.DNS.Rebinding() || c.DNS.RebindingAnswer != "" {
		t.Errorf("rebinding %v answer %q, want on and the default (servfail)", c.DNS.Rebinding(), c.DNS.RebindingAnswer)
	}
	if c.DNS.RateLimitQPS != DefaultRateLimitQPS || c.DNS.RateLimitBurst != DefaultRateLimitBurst {
		t.Errorf("rate limit %d/%d", c.DNS.RateLimitQPS, c.DNS.RateLimitBurst)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if got := c.DNS.RateExempt(); !slices.Equal(got, want) {
		t.Errorf("exempt %v, want %v", got, want)
	}
}

// TestGuards_trustedForwardersAreExempt: a trusted forwarder sends every
// device's queries from one address, so it is never rate limited as one
// device, even when rate_limit_exempt is set without it.
func TestGuards_trustedForwardersAreExempt(t *testing.T) {
	c := mustLoad(t, "[dns]\ntrusted_forwarders = [\"192.168.1.1\", \"::ffff:10.0.0.0/104\"]\nrate_limit_exempt = [\"::1\"]\n[[upstreams]]\nurl = \"tls://9.9.9.9\"\n")
	got := c.DNS.RateExempt()
	for _, want := range []string{"192.168.1.1/32", "10.0.0.0/8", "::1/128"} {
		if !slices.Contains(got, netip.MustParsePrefix(want)) {
			t.Errorf("exempt %v, want it to hold %s", got, want)
		}
	}
}

// TestGuards_badInput: each bad value is named by its key and code.
func TestGuards_badInput(t *testing.T) {
	ps := loadProblems(t, `
[dns]
rebinding_allow = ["ok.example", "not a name"]
rebinding_answer = "refused"
rate_limit_qps = 100
rate_limit_burst = 10
rate_limit_exempt = ["192.168.1.1", "192.168.1.0/33"]

[[upstreams]]
url = "tls://9.9.9.9"
`)
	for _, want := range []struct {
		path string
		code Code
	}{
		{"dns.rebinding_allow[1]", CodeInvalidName},
		{"dns.rebinding_answer", CodeInvalidChoice},
		{"dns.rate_limit_burst", CodeMinAboveMax},
		{"dns.rate_limit_exempt[1]", CodeInvalidCIDR},
	} {
		if !ps.Has(want.path, want.code) {
			t.Errorf("no %s %s in:\n%v", want.path, want.code, ps)
		}
	}
	if len(ps) != 4 {
		t.Errorf("%d problems, want 4:\n%v", len(ps), ps)
	}
}

// TestGroupUpstreams_takeTheEntrysSettings: a group URL that is an
// [[upstreams]] entry's (disabled in the main pool here) takes its address,
// tls_name and priority; another stands alone; a name without an entry is
// an error, as a duplicate is.
func TestGroupUpstreams_takeTheEntrysSettings(t *testing.T) {
	c := mustLoad(t, `
[[upstreams]]
url = "tls://9.9.9.9"

[[upstreams]]
url = "tls://family.example:853"
address = "192.0.2.7"
tls_name = "family.example"
priority = 3
enabled = false

[[filter.groups]]
name = "kids"
clients = ["192.168.1.20"]
upstreams = ["tls://family.example", "https://192.0.2.8/dns-query"]
`)
	pg := c.PooledGroups()
	if len(pg) != 1 || pg[0].Name != "kids" {
		t.Fatalf("pooled groups %v", pg)
	}
	ups := c.GroupUpstreams(pg[0])
	if len(ups) != 2 || ups[0].Address != "192.0.2.7" || ups[0].TLSName != "family.example" || ups[0].Priority != 3 || !ups[0].IsEnabled() {
		t.Errorf("first group upstream %+v, want the [[upstreams]] entry's settings, enabled", ups[0])
	}
	if ups[1].URL != "https://192.0.2.8/dns-query" || ups[1].Address != "" {
		t.Errorf("second group upstream %+v, want the URL alone", ups[1])
	}

	ps := loadProblems(t, `
[[upstreams]]
url = "tls://9.9.9.9"

[[filter.groups]]
name = "kids"
clients = ["192.168.1.20"]
upstreams = ["tls://family.example", "tls://192.0.2.8", "tls://192.0.2.8:853", "udp://192.0.2.9"]
`)
	for _, want := range []struct {
		path string
		code Code
	}{
		{"filter.groups[0].upstreams[0]", CodeAddressRequired},
		{"filter.groups[0].upstreams[2]", CodeDuplicate},
		{"filter.groups[0].upstreams[3]", CodeUnsupportedScheme},
	} {
		if !ps.Has(want.path, want.code) {
			t.Errorf("no %s %s in:\n%v", want.path, want.code, ps)
		}
	}
}

// TestGuards_misspeltKeySuggestsTheRightOne: a near miss of a new key is
// named with the key it meant.
func TestGuards_misspeltKeySuggestsTheRightOne(t *testing.T) {
	ps := loadProblems(t, "[dns]\nrebinding_alow = [\"plex.direct\"]\n[[upstreams]]\nurl = \"tls://9.9.9.9\"\n[[filter.groups]]\nname = \"kids\"\nupstream = [\"tls://192.0.2.1\"]\n")
	for path, want := range map[string]string{"dns.rebinding_alow": `"rebinding_allow"`, "filter.groups[0].upstream": `"upstreams"`} {
		found := false
		for _, p := range ps {
			if p.Path == path && p.Code == CodeUnknownKey && strings.Contains(p.Message, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no UnknownKey at %s suggesting %s in:\n%v", path, want, ps)
		}
	}
}
