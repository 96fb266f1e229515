package config

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/certs"
)

func TestDefault_isValid(t *testing.T) {
	if ps := Validate(Default()); len(ps) != 0 {
		t.Errorf("Default() has problems:\n%v", ps)
	}
	if n := len(Default().EnabledUpstreams()); n == 0 {
		t.Error("Default() has no enabled upstream: the binary would not run without a file")
	}
}

// valid is a small valid configuration for tests to break one rule at a time.
func valid() Config {
	c := Default()
	c.Upstreams = []UpstreamURL{{URL: "tls://9.9.9.9", TLSName: "dns.quad9.net"}}
	return c
}

func upstreams(enabled, disabled int) []UpstreamURL {
	off := false
	var us []UpstreamURL
	for i := range enabled + disabled {
		u := UpstreamURL{URL: fmt.Sprintf("tls://192.0.2.%d", i+1)}
		if i >= enabled {
			u.Enabled = &off
		}
		us = append(us, u)
	}
	return us
}

func TestValidate_upstreamBound(t *testing.T) {
	for _, tc := range []struct {
		name              string
		enabled, disabled int
		tooMany           bool
	}{
		{"64 enabled", MaxUpstreams, 0, false},
		{"65 enabled", MaxUpstreams + 1, 0, true},
		{"64 enabled and 1 disabled", MaxUpstreams, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.Upstreams = upstreams(tc.enabled, tc.disabled)
			ps := Validate(c)
			if got := ps.Has("upstreams", CodeTooManyUpstreams); got != tc.tooMany {
				t.Errorf("TooManyUpstreams = %v, want %v (problems: %v)", got, tc.tooMany, ps)
			}
			if !tc.tooMany && len(ps) != 0 {
				t.Errorf("unexpected problems: %v", ps)
			}
		})
	}
}

func TestValidate_timeoutBounds(t *testing.T) {
	for _, tc := range []struct {
		attempt, total, read int
		want                 Problems
	}{
		{100, 100, 100, nil},
		{120000, 120000, 120000, nil},
		{5000, 5000, 3000, nil}, // equal is allowed: the attempt is truncated to the budget anyway
		{99, 5000, 3000, Problems{{Path: "upstream.attempt_timeout_ms", Code: CodeOutOfRange}}},
		{2500, 120001, 3000, Problems{{Path: "upstream.total_timeout_ms", Code: CodeOutOfRange}}},
		{2500, 5000, 99, Problems{{Path: "upstream.read_timeout_ms", Code: CodeOutOfRange}}},
		{5001, 5000, 3000, Problems{{Path: "upstream.attempt_timeout_ms", Code: CodeAttemptAboveTotal}}},
		// Out of range is reported once, not again as above the total.
		{120001, 5000, 3000, Problems{{Path: "upstream.attempt_timeout_ms", Code: CodeOutOfRange}}},
	} {
		t.Run(fmt.Sprintf("%d/%d/%d", tc.attempt, tc.total, tc.read), func(t *testing.T) {
			c := valid()
			c.Upstream = Upstream{AttemptTimeoutMS: tc.attempt, TotalTimeoutMS: tc.total, ReadTimeoutMS: tc.read}
			assertProblems(t, Validate(c), tc.want)
		})
	}
}

// assertProblems compares paths and codes, never messages.
func assertProblems(t *testing.T, got, want Problems) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].Path != want[i].Path || got[i].Code != want[i].Code {
			t.Errorf("problem %d = %s %s, want %s %s", i, got[i].Path, got[i].Code, want[i].Path, want[i].Code)
		}
	}
}

// TestValidate_accepts keeps the rules from rejecting what an operator may
// legitimately write.
func TestValidate_accepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
	}{
		{"IPv6 DoT with port", func(c *Config) { c.Upstreams[0].URL = "tls://[2620:fe::fe]:853" }},
		{"DoH with path and query", func(c *Config) {
			c.Upstreams[0] = UpstreamURL{URL: "https://dns.example/dns-query?token=x", Address: "192.0.2.1"}
		}},
		{"DoH at the root path", func(c *Config) { c.Upstreams[0].URL = "https://192.0.2.1/" }},
		{"upper-case scheme and host", func(c *Config) { c.Upstreams[0].URL = "TLS://Dns.Quad9.Net"; c.Upstreams[0].Address = "9.9.9.9" }},
		{"tls with trailing slash", func(c *Config) { c.Upstreams[0].URL = "tls://9.9.9.9/" }},
		{"address overrides an IP host", func(c *Config) { c.Upstreams[0].Address = "149.112.112.112" }},
		{"tls_name is an IP", func(c *Config) { c.Upstreams[0].TLSName = "9.9.9.9" }},
		{"same host, different ports", func(c *Config) {
			c.Upstreams = append(c.Upstreams, UpstreamURL{URL: "tls://9.9.9.9:8853"})
		}},
		{"same DoH host, different paths", func(c *Config) {
			c.Upstreams = []UpstreamURL{{URL: "https://192.0.2.1/a"}, {URL: "https://192.0.2.1/b"}}
		}},
		{"negative priority", func(c *Config) { c.Upstreams[0].Priority = -5 }},
		{"zones", func(c *Config) {
			c.ForwardZones = []ForwardZone{
				{Zone: "lan", Resolver: "udp://192.168.1.1:53"},
				{Zone: "168.192.in-addr.arpa.", Resolver: "UDP://192.168.1.1:53"},
				{Zone: "_tcp.home.arpa", Resolver: "tcp://[fd00::1]:5353"},
				{Zone: "xn--bcher-kva.example", Resolver: "tcp://192.168.1.1:53"},
			}
		}},
		{"clients", func(c *Config) {
			c.Clients = []Client{{IP: "192.168.1.10", Name: "Anna's laptop"}, {IP: "fd00::10", Name: "tv"}}
		}},
		{"wildcard listeners", func(c *Config) { c.DNS.Listen = []string{"0.0.0.0:53", "[::]:53"} }},
		{"allow everybody explicitly", func(c *Config) { c.DNS.Allow = []string{"0.0.0.0/0", "::/0"} }},
		{"unmasked prefix", func(c *Config) { c.DNS.Allow = []string{"192.168.1.7/24"} }},
		{"web disabled", func(c *Config) { c.Web.Listen = "" }},
		{"web on every address", func(c *Config) {
			c.Web.Listen = "[::]:9153"
			c.Web.PasswordFile = "/run/credentials/nxdns.service/web-password"
		}},
		{"history on disk", func(c *Config) { c.History.Path = "/var/lib/nxdns/history.db" }},
		{"cache disabled", func(c *Config) { c.DNS.CacheSize = 0; c.DNS.StaleMaxAge = 0 }},
		{"cache min equals max", func(c *Config) { c.DNS.CacheMinTTL, c.DNS.CacheMaxTTL = 300, 300 }},
		{"every level", func(c *Config) { c.Log.Level = "warn" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.change(&c)
			if ps := Validate(c); len(ps) != 0 {
				t.Errorf("unexpected problems:\n%v", ps)
			}
		})
	}
}

func TestValidate_disabledUpstreamsAreValidated(t *testing.T) {
	off := false
	c := valid()
	c.Upstreams = append(c.Upstreams,
		UpstreamURL{URL: "tls://dns.quad9.net", Enabled: &off}, // no address
		UpstreamURL{URL: "tls://9.9.9.9:853", Enabled: &off},   // duplicate of [0]
	)
	assertProblems(t, Validate(c), Problems{
		{Path: "upstreams[1].address", Code: CodeAddressRequired},
		{Path: "upstreams[2].url", Code: CodeDuplicate},
	})
}

// TestValidate_messagesNeverQuoteURLSecrets: a DoH path or userinfo may hold
// an account token, and problems go to logs and CI output.
func TestValidate_messagesNeverQuoteURLSecrets(t *testing.T) {
	c := valid()
	c.Upstreams = []UpstreamURL{
		{URL: "https://user:s3cret@192.0.2.1/s3cret"},
		{URL: "https://192.0.2.1/s3cret#s3cret"},
		{URL: "https://192.0.2.1:99999/s3cret"},
		{URL: "https://192.0.2.1/%zz/s3cret"},
		{URL: "tls://192.0.2.1/s3cret"},
		{URL: "https://192.0.2.2/s3cret"},
		{URL: "https://192.0.2.2/s3cret"},
	}
	ps := Validate(c)
	if len(ps) != 6 {
		t.Fatalf("want a problem per bad URL, got %v", ps)
	}
	if s := ps.Error(); strings.Contains(s, "s3cret") {
		t.Errorf("a problem quotes a secret:\n%s", s)
	}
}

// ReadFiles reads each ca_file once and keeps it; a file that is not a
// regular PEM file within the cap is a CAFile problem, at once (issue 13
// finding 3: a FIFO hung `nxdns check` and a reload; /dev/zero grew memory
// at 0.5 GB/s).
func TestReadFiles_caFile(t *testing.T) {
	dir := t.TempDir()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	pemFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := ca.WriteFiles(pemFile, keyFile); err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "notpem.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "ca.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.pem")
	if err := os.WriteFile(huge, bytes.Repeat([]byte("#"), MaxCAFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file string
		ok         bool
	}{
		{"FIFO without a writer", fifo, false},
		{"device", "/dev/zero", false},
		{"over the size cap", huge, false},
		{"PEM certificate", pemFile, true},
		{"key only", keyFile, false},
		{"not PEM", notPEM, false},
		{"missing", filepath.Join(dir, "missing.pem"), false},
		{"directory", dir, false},
		{"relative", "ca.pem", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.Upstreams[0].CAFile = tc.file
			done := make(chan Problems, 1)
			go func() { done <- c.ReadFiles() }()
			var ps Problems
			select {
			case ps = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("ReadFiles did not return within 5 s")
			}
			if tc.ok {
				assertProblems(t, ps, nil)
				if !bytes.Equal(c.Upstreams[0].CA, ca.PEM) {
					t.Error("the PEM read is not kept for the transport")
				}
			} else {
				assertProblems(t, ps, Problems{{Path: "upstreams[0].ca_file", Code: CodeCAFile}})
			}
		})
	}
}

func TestValidName(t *testing.T) {
	long := strings.Repeat("a", 63)
	for _, tc := range []struct {
		s          string
		host, zone bool
	}{
		{"dns.quad9.net", true, true},
		{"dns.quad9.net.", true, true},
		{"localhost", true, true},
		{long + ".example", true, true},
		{long + "a.example", false, false},
		{strings.Repeat(long+".", 4)[:253], true, true},
		{strings.Repeat(long+".", 4)[:254] + "a", false, false},
		{"_dns.example", false, true},
		{"-a.example", false, false},
		{"a-.example", false, false},
		{"a..example", false, false},
		{"", false, false},
		{".", false, false},
		{"a b.example", false, false},
		{"*.example", false, false},
	} {
		if got := validHost(tc.s); got != tc.host {
			t.Errorf("validHost(%q) = %v, want %v", tc.s, got, tc.host)
		}
		if got := validZone(tc.s); got != tc.zone {
			t.Errorf("validZone(%q) = %v, want %v", tc.s, got, tc.zone)
		}
	}
}

// A zone resolver that is nxdns itself is a loop, also through a wildcard
// listen address and the host's own addresses (issue 13 finding 6).
func TestListensOn(t *testing.T) {
	own := netip.MustParseAddr("192.168.1.2")
	defer func(f func() []netip.Addr) { localAddrs = f }(localAddrs)
	localAddrs = func() []netip.Addr { return []netip.Addr{own} }
	for _, tc := range []struct {
		listen   []string
		resolver string
		loop     bool
	}{
		{[]string{"127.0.0.1:53"}, "127.0.0.1:53", true},
		{[]string{"127.0.0.1:53"}, "127.0.0.1:5353", false},
		{[]string{"127.0.0.1:53"}, "127.0.0.2:53", false},
		{[]string{"0.0.0.0:53"}, "127.0.0.53:53", true},
		{[]string{"0.0.0.0:53"}, "192.168.1.2:53", true},
		{[]string{"0.0.0.0:53"}, "192.168.1.1:53", false},
		{[]string{"0.0.0.0:53"}, "[::1]:53", false},
		{[]string{"[::]:53"}, "[::1]:53", true},
		{[]string{"[::1]:53", "192.168.1.2:53"}, "192.168.1.2:53", true},
	} {
		_, got := listensOn(tc.listen, netip.MustParseAddrPort(tc.resolver))
		if got != tc.loop {
			t.Errorf("listensOn(%v, %s) = %v, want %v", tc.listen, tc.resolver, got, tc.loop)
		}
	}
}

// TestValidate_webHostnamesAndTLSListen: a hostile or broken web.hostnames
// entry or web.tls_listen is named by its key, with its code; a good one
// passes.
func TestValidate_webHostnamesAndTLSListen(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Config)
		path   string
		code   Code
	}{
		{"host name with a scheme", func(c *Config) { c.Web.Hostnames = []string{"http://nxdns.home.arpa"} }, "web.hostnames[0]", CodeInvalidName},
		{"host name with a port", func(c *Config) { c.Web.Hostnames = []string{"ok.home.arpa", "nxdns.home.arpa:9153"} }, "web.hostnames[1]", CodeInvalidName},
		{"markup as a host name", func(c *Config) { c.Web.Hostnames = []string{"<script>"} }, "web.hostnames[0]", CodeInvalidName},
		{"empty host name", func(c *Config) { c.Web.Hostnames = []string{""} }, "web.hostnames[0]", CodeInvalidName},
		{"tls_listen not an address", func(c *Config) { c.Web.TLSListen = "nowhere" }, "web.tls_listen", CodeInvalidListen},
		{"tls_listen without a certificate", func(c *Config) { c.Web.TLSListen = "127.0.0.1:9443" }, "web.tls_listen", CodeRequired},
		{"tls_listen equal to listen", func(c *Config) { c.Web.TLSListen = c.Web.Listen }, "web.tls_listen", CodeDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			c.Web.Listen = "127.0.0.1:9153"
			tc.change(&c)
			ps := Validate(c)
			for _, p := range ps {
				if p.Path == tc.path && p.Code == tc.code {
					return
				}
			}
			t.Fatalf("want a %s problem with code %v, got:\n%v", tc.path, tc.code, ps)
		})
	}
	c := valid()
	c.Web.Listen = "127.0.0.1:9153"
	c.Web.Hostnames = []string{"nxdns.home.arpa", "pi"}
	if ps := Validate(c); len(ps) != 0 {
		t.Fatalf("good web.hostnames refused:\n%v", ps)
	}
}

// TestValidate_groupSwitches: a misspelt service gets a did-you-mean, an
// unknown engine and mode are named, and the right ones pass.
func TestValidate_groupSwitches(t *testing.T) {
	c := Default()
	c.Filter.Groups = []FilterGroup{{Name: "kids", Services: []string{"youtube", "tiktock", "youtube"},
		SafeSearch: []string{"google", "yahooo"}, YouTubeMode: "strictest"}}
	ps := Validate(c)
	for _, want := range []struct {
		path string
		code Code
		text string
	}{
		{"filter.groups[0].services[1]", CodeUnknownService, `did you mean "tiktok"?`},
		{"filter.groups[0].services[2]", CodeDuplicate, "twice"},
		{"filter.groups[0].safe_search[1]", CodeInvalidChoice, "google, bing, duckduckgo, youtube"},
		{"filter.groups[0].youtube_mode", CodeInvalidChoice, "strict or moderate"},
	} {
		found := false
		for _, p := range ps {
			if p.Path == want.path && p.Code == want.code && strings.Contains(p.Message, want.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s %s containing %q in\n%v", want.path, want.code, want.text, ps)
		}
	}
	c.Filter.Groups = []FilterGroup{{Name: "kids", Services: []string{"youtube", "tiktok"},
		SafeSearch: []string{"google", "bing", "duckduckgo", "youtube"}, YouTubeMode: "moderate"}}
	if ps := Validate(c); len(ps) != 0 {
		t.Errorf("valid switches rejected: %v", ps)
	}
}
