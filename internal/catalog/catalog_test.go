package catalog

import (
	"strings"
	"testing"
)

func TestServices_embeddedCatalogueParsesWithTheIssuesServices(t *testing.T) {
	c := Services()
	if c.Version == "" {
		t.Fatal("no version")
	}
	if n := len(c.Services); n < 40 {
		t.Fatalf("%d services, want at least 40", n)
	}
	// The services parents ask about (issue 32) are all there.
	for _, id := range []string{"youtube", "tiktok", "instagram", "facebook", "messenger", "whatsapp", "snapchat",
		"discord", "roblox", "fortnite", "minecraft", "steam", "twitch", "netflix", "disneyplus", "reddit", "x",
		"telegram", "pinterest", "tumblr", "spotify", "primevideo", "playstation", "xbox", "nintendo"} {
		s, ok := c.Lookup(id)
		if !ok {
			t.Errorf("%s: not in the catalogue", id)
			continue
		}
		if s.Name == "" || s.Source == "" || len(s.Domains) == 0 {
			t.Errorf("%s: %+v: want a name, a source and domains", id, s)
		}
	}
	for _, s := range c.Services {
		if !strings.Contains(s.Source, "first-party") && !strings.Contains(s.Source, "vendor-docs") {
			t.Errorf("%s: source %q names no source kind", s.ID, s.Source)
		}
	}
}

func TestParse_rejectsABrokenCatalogueWithItsLine(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"no version", "service a A\nsource first-party: x\na.com\n", "no version"},
		{"upper-case id", "version 1\nservice YouTube YouTube\n", "line 2"},
		{"duplicate id", "version 1\nservice a A\nsource s\na.com\nservice a B\n", "twice"},
		{"no source", "version 1\nservice a A\na.com\nservice b B\n", "line 4"},
		{"no domain", "version 1\nservice a A\nsource s\n", "no domain"},
		{"bad domain", "version 1\nservice a A\nsource s\nexa mple.com\n", "line 4"},
		{"single label", "version 1\nservice a A\nsource s\ncom\n", "not a domain"},
		{"domain before service", "version 1\na.com\n", "line 2"},
	} {
		_, err := Parse(tc.text)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestRewrites_everyEngineHasItsDocumentedTarget(t *testing.T) {
	rw := Rewrites()
	for name, want := range map[string]string{
		"www.google.com": GoogleTarget, "google.co.uk": GoogleTarget, "www.google.de": GoogleTarget,
		"www.bing.com": BingTarget, "duckduckgo.com": DuckDuckGoTarget,
		"www.youtube.com": YouTubeStrictT, "youtubei.googleapis.com": YouTubeStrictT,
	} {
		if got := rw[name].Target; got != want {
			t.Errorf("%s → %q, want %q", name, got, want)
		}
	}
	if rw["m.youtube.com"].ModerateTarget != YouTubeModerateT {
		t.Errorf("m.youtube.com: no moderate target")
	}
	if n := len(GoogleDomains()); n < 150 {
		t.Errorf("%d Google domains, want its country domains too", n)
	}
	if _, ok := rw[GoogleTarget]; ok {
		t.Errorf("the target itself is rewritten: a loop")
	}
}
