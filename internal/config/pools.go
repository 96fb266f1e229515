package config

import (
	"fmt"
	"slices"
)

// Per-group upstreams: [[filter.groups]] upstreams (docs/filter.md
// "Per-group upstreams"). Each element is an upstream URL. One that is the
// URL of an [[upstreams]] entry, enabled or not, takes that entry's
// address, tls_name, ca_file and priority, so a family resolver needing an
// address or a CA is declared once, with `enabled = false` when it must
// serve only its groups. Any other element stands alone: its host must be
// an IP address (nxdns never resolves an upstream's name).

// PooledGroups are the groups that name upstreams of their own, in file
// order.
func (c Config) PooledGroups() []FilterGroup {
	var out []FilterGroup
	for _, g := range c.Filter.Groups {
		if len(g.Upstreams) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// GroupUpstreams is the group's pool as [[upstreams]] entries, every one
// enabled, in the group's order (a matched entry keeps its priority).
func (c Config) GroupUpstreams(g FilterGroup) []UpstreamURL {
	ids := map[string]int{}
	for i, u := range c.Upstreams {
		var ps Problems
		if id, _ := checkURL(&ps, "", u.URL); id != "" {
			ids[id] = i
		}
	}
	out := make([]UpstreamURL, 0, len(g.Upstreams))
	for _, raw := range g.Upstreams {
		var ps Problems
		id, _ := checkURL(&ps, "", raw)
		u := UpstreamURL{URL: raw}
		if i, ok := ids[id]; ok && id != "" {
			u = c.Upstreams[i]
			u.Enabled = nil
		}
		out = append(out, u)
	}
	return out
}

func checkGroupUpstreams(ps *Problems, c Config) {
	known := map[string]bool{}
	for _, u := range c.Upstreams {
		var scratch Problems
		if id, _ := checkURL(&scratch, "", u.URL); id != "" {
			known[id] = true
		}
	}
	for gi, g := range c.Filter.Groups {
		if len(g.Upstreams) > MaxUpstreams {
			ps.add(fmt.Sprintf("filter.groups[%d].upstreams", gi), CodeTooManyUpstreams, "%d upstreams, at most %d", len(g.Upstreams), MaxUpstreams)
		}
		var seen []string
		for i, raw := range g.Upstreams {
			path := fmt.Sprintf("filter.groups[%d].upstreams[%d]", gi, i)
			id, hostIsName := checkURL(ps, path, raw)
			switch {
			case id == "":
			case slices.Contains(seen, id):
				ps.add(path, CodeDuplicate, "the same upstream twice in one group")
			case hostIsName && !known[id]:
				ps.add(path, CodeAddressRequired,
					"the URL's host is a name and nxdns never resolves an upstream's name: use its IP address, or declare it as an [[upstreams]] entry with its address (enabled = false to keep it out of the main pool) and name that url here")
			}
			seen = append(seen, id)
		}
	}
}
