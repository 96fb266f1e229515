package config

import (
	"strings"
	"testing"
)

// TestLoad_messagesSayWhatToFix: the messages of issue 16 finding 17 name
// the actual mistake, not a neighbouring one.
func TestLoad_messagesSayWhatToFix(t *testing.T) {
	for _, tc := range []struct {
		name, doc, path string
		want            []string // substrings of the problem's message
	}{
		{"resolver port out of range", minimal + "[[forward_zones]]\nzone = \"lan\"\nresolver = \"udp://127.0.0.1:99999\"\n",
			"forward_zones[0].resolver", []string{"port 99999", "1 to 65535"}},
		{"resolver port not a number", minimal + "[[forward_zones]]\nzone = \"lan\"\nresolver = \"tcp://[fd00::1]:dns\"\n",
			"forward_zones[0].resolver", []string{`port "dns" is not a number`}},
		{"listen port 65536", "[dns]\nlisten = [\"127.0.0.1:65536\"]\n" + minimal,
			"dns.listen[0]", []string{"port 65536", "1 to 65535"}},
		{"listen port huge", "[dns]\nlisten = [\"[::1]:99999999999999999999\"]\n" + minimal,
			"dns.listen[0]", []string{"out of range", "1 to 65535"}},
		{"single brackets", "[upstreams]\nurl = \"tls://9.9.9.9\"\n\n[[upstreams]]\nurl = \"tls://1.1.1.1\"\n",
			"upstreams", []string{"[[upstreams]]", "double brackets"}},
		{"single brackets alone", "[upstreams]\nurl = \"tls://9.9.9.9\"\n",
			"upstreams", []string{"[[upstreams]]"}},
		{"misspelt upstream key", minimal + "tls_nmae = \"dns.quad9.net\"\n",
			"upstreams[0].tls_nmae", []string{`did you mean "tls_name"?`}},
		{"misspelt section key", "[dns]\nlisen = [\"127.0.0.1:53\"]\n" + minimal,
			"dns.lisen", []string{`did you mean "listen"?`}},
		{"misspelt table", "[upstraem]\ntotal_timeout_ms = 4000\n" + minimal,
			"upstraem", []string{`did you mean "upstream"?`}},
		{"misspelt device key", "[devices]\nnew_device = \"kids\"\n" + minimal,
			"devices.new_device", []string{`did you mean "new_devices"?`}},
		{"misspelt client mac", "[[clients]]\nname = \"tablet\"\nip = \"192.168.1.5\"\nmca = \"02:00:5e:00:53:01\"\n" + minimal,
			"clients[0].mca", []string{`did you mean "mac"?`}},
		{"misspelt trusted forwarders", "[dns]\ntrusted_forwarder = [\"192.168.1.1\"]\n" + minimal,
			"dns.trusted_forwarder", []string{`did you mean "trusted_forwarders"?`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := loadProblems(t, tc.doc)
			if len(ps) != 1 || ps[0].Path != tc.path {
				t.Fatalf("got %v, want one problem at %s", ps, tc.path)
			}
			for _, w := range tc.want {
				if !strings.Contains(ps[0].Message, w) {
					t.Errorf("message %q lacks %q", ps[0].Message, w)
				}
			}
		})
	}
}

// TestSuggestKey_onlyCloseSiblings: a word far from every key gets no
// suggestion, and suggestions come from the key's own table.
func TestSuggestKey_onlyCloseSiblings(t *testing.T) {
	for path, want := range map[string]string{
		"upstreams[2].tls_nmae": "tls_name",
		"upstreams[0].adress":   "address",
		"dns.allwo":             "allow",
		"dns.tls_name":          "", // an upstream's key, not a dns one
		"upstreams[0].colour":   "",
		"log.x":                 "",
		"nonsense.key":          "",
	} {
		if got := suggestKey(path); got != want {
			t.Errorf("suggestKey(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"tls_nmae", "tls_name", 1},
		{"listen", "lisen", 1}, {"allow", "alow", 1}, {"kitten", "sitting", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
