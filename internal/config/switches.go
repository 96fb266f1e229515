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
	checkNames(ps, path+".services", g.Services, cat.IDs(), CodeUnknownService, func(id string) string {
		return fmt.Sprintf("%q is not a service of the catalogue (GET /api/filter/services lists them)", id)
	})
	checkNames(ps, path+".safe_search", g.SafeSearch, catalog.Engines, CodeInvalidChoice, func(e string) string {
		return fmt.Sprintf("%q: want one of %s", e, strings.Join(catalog.Engines, ", "))
	})
	switch g.YouTubeMode {
	case "", catalog.YouTubeStrict, catalog.YouTubeModerate:
	default:
		ps.add(path+".youtube_mode", CodeInvalidChoice, "%q: want strict or moderate", g.YouTubeMode)
	}
}

// checkNames checks that each of names at path is one of known, once: an
// unknown one is code with unknown's message and a did-you-mean.
func checkNames(ps *Problems, path string, names, known []string, code Code, unknown func(string) string) {
	seen := map[string]bool{}
	for k, n := range names {
		at := fmt.Sprintf("%s[%d]", path, k)
		if !contains(known, n) {
			msg := unknown(n)
			if hint := closest(n, known); hint != "" {
				msg += fmt.Sprintf("; did you mean %q?", hint)
			}
			ps.add(at, code, "%s", msg)
			continue
		}
		if seen[n] {
			ps.add(at, CodeDuplicate, "%q is named twice", n)
		}
		seen[n] = true
	}
}
