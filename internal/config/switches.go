package config

import (
	"fmt"
	"strings"

	"github.com/nxdns/nxdns/internal/catalog"
)

// checkGroupSwitches checks a group's household switches
// (docs/reference/configuration.md "[[filter.groups]]"): services are
// catalogue ids, with a did-you-mean for a misspelt one; safe_search names
// known engines; youtube_mode is strict or moderate.
func checkGroupSwitches(ps *Problems, path string, g FilterGroup) {
	cat := catalog.Services()
	seen := map[string]bool{}
	for k, id := range g.Services {
		at := fmt.Sprintf("%s.services[%d]", path, k)
		if _, ok := cat.Lookup(id); !ok {
			msg := fmt.Sprintf("%q is not a service of the catalogue (GET /api/filter/services lists them)", id)
			if hint := closest(id, cat.IDs()); hint != "" {
				msg += fmt.Sprintf("; did you mean %q?", hint)
			}
			ps.add(at, CodeUnknownService, "%s", msg)
			continue
		}
		if seen[id] {
			ps.add(at, CodeDuplicate, "%q is named twice", id)
		}
		seen[id] = true
	}
	seen = map[string]bool{}
	for k, e := range g.SafeSearch {
		at := fmt.Sprintf("%s.safe_search[%d]", path, k)
		if !contains(catalog.Engines, e) {
			msg := fmt.Sprintf("%q: want one of %s", e, strings.Join(catalog.Engines, ", "))
			if hint := closest(e, catalog.Engines); hint != "" {
				msg += fmt.Sprintf("; did you mean %q?", hint)
			}
			ps.add(at, CodeInvalidChoice, "%s", msg)
			continue
		}
		if seen[e] {
			ps.add(at, CodeDuplicate, "%q is named twice", e)
		}
		seen[e] = true
	}
	switch g.YouTubeMode {
	case "", catalog.YouTubeStrict, catalog.YouTubeModerate:
	default:
		ps.add(path+".youtube_mode", CodeInvalidChoice, "%q: want strict or moderate", g.YouTubeMode)
	}
}
