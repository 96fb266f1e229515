// Package catalog is the data nxdns ships for the household switches of
// [[filter.groups]] (docs/filter.md "Blocked services", "Safe search"): the
// blocked-services catalogue compiled by this project (services.txt, whose
// header says where each service's names come from) and the search
// engines' documented safe-search endpoints. Both are embedded in the
// binary and parsed once; the package imports nothing internal, so the
// configuration's validation and the filter share one copy.
package catalog

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"
)

//go:embed services.txt
var servicesText string

//go:embed google-domains.txt
var googleText string

// Service is one entry of the catalogue.
type Service struct {
	ID      string   `json:"id"`      // lower-case; what [[filter.groups]] services names
	Name    string   `json:"name"`    // for people: "TikTok"
	Source  string   `json:"source"`  // where the domains come from (the data file's source line)
	Domains []string `json:"domains"` // each blocks itself and every name below it
}

// Catalogue is the parsed services.txt.
type Catalogue struct {
	Version  string
	Services []Service // in the file's order
	byID     map[string]int
}

var (
	once   sync.Once
	loaded *Catalogue
)

// Services returns the embedded catalogue, parsed on first use. The file is
// part of the binary and its parser test, so a bad file never ships; a
// parse failure here would be a build defect and panics.
func Services() *Catalogue {
	once.Do(func() {
		c, err := Parse(servicesText)
		if err != nil {
			panic("catalog: embedded services.txt: " + err.Error())
		}
		loaded = c
	})
	return loaded
}

// Lookup returns the service with id.
func (c *Catalogue) Lookup(id string) (Service, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Service{}, false
	}
	return c.Services[i], true
}

// Index is id's position in Services, or -1.
func (c *Catalogue) Index(id string) int {
	if i, ok := c.byID[id]; ok {
		return i
	}
	return -1
}

// IDs lists the services' ids in the file's order.
func (c *Catalogue) IDs() []string {
	out := make([]string, len(c.Services))
	for i, s := range c.Services {
		out[i] = s.ID
	}
	return out
}

// MaxServices bounds the catalogue so a group's services fit a fixed-size
// bit set (the filter's per-query check allocates nothing).
const MaxServices = 128

// Parse reads a catalogue in the services.txt format: "#" comments, one
// "version V" line, then per service a "service ID Name…" line, a "source
// …" line and one domain a line.
func Parse(text string) (*Catalogue, error) {
	c := &Catalogue{byID: map[string]int{}}
	var cur *Service
	seen := map[string]bool{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		at := func(f string, a ...any) error { return fmt.Errorf("line %d: %s", n+1, fmt.Sprintf(f, a...)) }
		word, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch word {
		case "version":
			if c.Version != "" || rest == "" {
				return nil, at("one version line with a value")
			}
			c.Version = rest
		case "service":
			id, name, _ := strings.Cut(rest, " ")
			if !validID(id) || strings.TrimSpace(name) == "" {
				return nil, at("want \"service ID Name\" with a lower-case id of letters, digits and '-'")
			}
			if _, dup := c.byID[id]; dup {
				return nil, at("service %q twice", id)
			}
			if cur != nil && (cur.Source == "" || len(cur.Domains) == 0) {
				return nil, at("service %q before %q has its source line and a domain", id, cur.ID)
			}
			c.byID[id] = len(c.Services)
			c.Services = append(c.Services, Service{ID: id, Name: strings.TrimSpace(name)})
			cur = &c.Services[len(c.Services)-1]
			seen = map[string]bool{}
		case "source":
			if cur == nil || cur.Source != "" || rest == "" {
				return nil, at("a source line belongs to one service, once")
			}
			cur.Source = rest
		default:
			if cur == nil || rest != "" {
				return nil, at("%q: want a domain of the service above", line)
			}
			d := strings.ToLower(strings.TrimSuffix(word, "."))
			if !validDomain(d) {
				return nil, at("%q: not a domain name", word)
			}
			if seen[d] {
				return nil, at("%q twice in service %q", d, cur.ID)
			}
			seen[d] = true
			cur.Domains = append(cur.Domains, d)
		}
		if len(c.Services) > MaxServices {
			return nil, at("more than %d services", MaxServices)
		}
	}
	if c.Version == "" {
		return nil, fmt.Errorf("no version line")
	}
	if cur == nil || cur.Source == "" || len(cur.Domains) == 0 {
		return nil, fmt.Errorf("the last service has no source line or no domain")
	}
	return c, nil
}

func validID(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// validDomain accepts a lower-case host name of at least two labels.
func validDomain(s string) bool {
	if len(s) > 253 || !strings.Contains(s, ".") {
		return false
	}
	for l := range strings.SplitSeq(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Safe-search engine ids, as [[filter.groups]] safe_search names them.
const (
	Google     = "google"
	Bing       = "bing"
	DuckDuckGo = "duckduckgo"
	YouTube    = "youtube"
)

// YouTube's restricted modes (youtube_mode).
const (
	YouTubeStrict   = "strict"
	YouTubeModerate = "moderate"
)

// Engines are the safe-search engine ids in the order the docs list them.
var Engines = []string{Google, Bing, DuckDuckGo, YouTube}

// Rewrite is one name answered as a CNAME to an engine's safe endpoint.
type Rewrite struct {
	Engine string
	// Target is the endpoint; for YouTube it is the strict one, and
	// ModerateTarget the moderate one.
	Target, ModerateTarget string
}

// The engines' documented endpoints (docs/filter.md "Safe search" cites each
// engine's page).
const (
	GoogleTarget     = "forcesafesearch.google.com"
	BingTarget       = "strict.bing.com"
	DuckDuckGoTarget = "safe.duckduckgo.com"
	YouTubeStrictT   = "restrict.youtube.com"
	YouTubeModerateT = "restrictmoderate.youtube.com"
)

var (
	rwOnce   sync.Once
	rewrites map[string]Rewrite
)

// Rewrites maps each name (lower case, no trailing dot) that a safe-search
// switch answers as a CNAME to its rewrite: www. and the bare name of every
// Google Search domain; www.bing.com and bing.com; duckduckgo.com and
// www.duckduckgo.com; and the five YouTube names Google's network
// restriction page lists. The map is shared: callers must not change it.
func Rewrites() map[string]Rewrite {
	rwOnce.Do(func() {
		m := map[string]Rewrite{}
		for line := range strings.Lines(googleText) {
			d := strings.TrimSpace(line)
			if d == "" || d[0] == '#' {
				continue
			}
			m[d] = Rewrite{Engine: Google, Target: GoogleTarget}
			m["www."+d] = Rewrite{Engine: Google, Target: GoogleTarget}
		}
		for _, d := range []string{"bing.com", "www.bing.com"} {
			m[d] = Rewrite{Engine: Bing, Target: BingTarget}
		}
		for _, d := range []string{"duckduckgo.com", "www.duckduckgo.com"} {
			m[d] = Rewrite{Engine: DuckDuckGo, Target: DuckDuckGoTarget}
		}
		for _, d := range []string{"www.youtube.com", "m.youtube.com", "youtubei.googleapis.com", "youtube.googleapis.com", "www.youtube-nocookie.com"} {
			m[d] = Rewrite{Engine: YouTube, Target: YouTubeStrictT, ModerateTarget: YouTubeModerateT}
		}
		rewrites = m
	})
	return rewrites
}

// GoogleDomains lists the Google Search domains the google switch covers.
func GoogleDomains() []string {
	var out []string
	for name, rw := range Rewrites() {
		if rw.Engine == Google && !strings.HasPrefix(name, "www.") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Text is services.txt as the binary embeds it (for the load benchmark).
func Text() string { return servicesText }
