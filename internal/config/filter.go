package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// Filter is the [filter] section: blocklists, allowlists, client groups
// and what a blocked name gets (docs/design.md#filter-answers).
type Filter struct {
	Lists         []FilterList  `toml:"lists"`
	Groups        []FilterGroup `toml:"groups"`
	Block         []string      `toml:"block"`          // inline rules, any list line format
	Allow         []string      `toml:"allow"`          // inline allow rules; they win over every block rule
	BlockResponse string        `toml:"block_response"` // "null", "nxdomain" or "refused"
	BlockTTL      int           `toml:"block_ttl"`      // seconds
	RefreshHours  int           `toml:"refresh_hours"`  // how often URL lists are downloaded again
	StateDir      string        `toml:"state_dir"`      // where downloaded lists and their ETags are kept
	// The names caps (docs/filter.md "Names caps"): a list's names past
	// MaxNamesPerList, and every list's past MaxNames in all, are left out
	// and counted, so one huge list cannot take the memory of a small host.
	MaxNamesPerList int `toml:"max_names_per_list"`
	MaxNames        int `toml:"max_names"`
}

// The names caps' defaults and their upper bound: at about 9 bytes a name
// loaded and 35 at the peak of a reload (docs/performance.md), 2 million
// names stay within some 20 MB, and 70 MB while a refresh builds the new
// set beside the old, on a Pi with 512 MB.
const (
	DefaultMaxNamesPerList = 1_000_000
	DefaultMaxNames        = 2_000_000
	maxNamesBound          = 50_000_000
)

// FilterList is one element of [[filter.lists]].
type FilterList struct {
	Name string `toml:"name"` // the metrics label and the name groups use
	URL  string `toml:"url"`  // http:// or https://; or
	Path string `toml:"path"` // an absolute local file
	Kind string `toml:"kind"` // "block" (default) or "allow"
}

// IsAllow reports whether the list is an allowlist.
func (l FilterList) IsAllow() bool { return l.Kind == ListAllow }

// FilterGroup is one element of [[filter.groups]].
type FilterGroup struct {
	Name     string   `toml:"name"`
	Clients  []string `toml:"clients"`  // IPs, CIDRs or [[clients]] names
	Lists    []string `toml:"lists"`    // list names
	Schedule []Window `toml:"schedule"` // when the lists apply; empty means always
	// Upstreams is the group's own upstream pool (pools.go); empty: the
	// main pool.
	Upstreams []string `toml:"upstreams"`
	// The household switches (docs/filter.md "Blocked services", "Safe
	// search"), applied when the schedule is on, as the lists are.
	Services    []string `toml:"services"`     // catalogue ids (GET /api/filter/services)
	SafeSearch  []string `toml:"safe_search"`  // engines: google, bing, duckduckgo, youtube
	YouTubeMode string   `toml:"youtube_mode"` // "strict" (default) or "moderate"
}

// Window is a time window on some days, in the host's local time. To
// before From runs past midnight into the next day (22:00–06:00).
type Window struct {
	Days []string `toml:"days" json:"days,omitempty"` // "mon" … "sun"; empty means every day
	From string   `toml:"from" json:"from"`           // "HH:MM"
	To   string   `toml:"to" json:"to"`               // "HH:MM"; "24:00" is the end of the day
}

// List kinds and block responses.
const (
	ListBlock = "block"
	ListAllow = "allow"

	ResponseNull     = "null"
	ResponseNXDomain = "nxdomain"
	ResponseRefused  = "refused"

	// DefaultGroup is the group a client in no other group gets.
	DefaultGroup = "default"

	// MaxFilterLists is one fewer than the filter's bit per list: the
	// inline rules take the last bit.
	MaxFilterLists = 63
)

// FilterDefaults are the [filter] keys' defaults.
func FilterDefaults() Filter {
	return Filter{BlockResponse: ResponseNull, BlockTTL: 60, RefreshHours: 24,
		MaxNamesPerList: DefaultMaxNamesPerList, MaxNames: DefaultMaxNames}
}

// Days are the accepted day names, Sunday first as time.Weekday counts.
var Days = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseClock parses "HH:MM" (00:00 to 24:00) into minutes after midnight.
func ParseClock(s string) (int, bool) {
	if s == "24:00" {
		return 24 * 60, true
	}
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, false
	}
	return t.Hour()*60 + t.Minute(), true
}

func checkFilter(ps *Problems, f Filter, clients []Client) {
	switch f.BlockResponse {
	case ResponseNull, ResponseNXDomain, ResponseRefused:
	default:
		ps.add("filter.block_response", CodeInvalidChoice, "%q: want null, nxdomain or refused", f.BlockResponse)
	}
	checkRange(ps, "filter.block_ttl", f.BlockTTL, 0, 86400)
	checkRange(ps, "filter.refresh_hours", f.RefreshHours, 1, 24*30)
	checkRange(ps, "filter.max_names_per_list", f.MaxNamesPerList, 1, maxNamesBound)
	checkRange(ps, "filter.max_names", f.MaxNames, 1, maxNamesBound)
	if f.StateDir != "" && !filepath.IsAbs(f.StateDir) {
		ps.add("filter.state_dir", CodeInvalidPath, "%q: want an absolute path", f.StateDir)
	}
	if len(f.Lists) > MaxFilterLists {
		ps.add("filter.lists", CodeTooManyLists, "%d lists, at most %d", len(f.Lists), MaxFilterLists)
	}
	names := map[string]int{}
	for i, l := range f.Lists {
		path := fmt.Sprintf("filter.lists[%d]", i)
		switch {
		case l.Name == "":
			ps.add(path+".name", CodeRequired, "missing: a list has a name (the metrics label)")
		case !validListName(l.Name):
			ps.add(path+".name", CodeInvalidName, "%q: 1 to 64 letters, digits, '-', '_' or '.'", l.Name)
		default:
			if j, dup := names[l.Name]; dup {
				ps.add(path+".name", CodeDuplicate, "%q is already filter.lists[%d].name", l.Name, j)
			} else {
				names[l.Name] = i
			}
		}
		switch {
		case l.URL != "" && l.Path != "":
			ps.add(path, CodeURLAndPath, "url and path together: a list is one or the other")
		case l.URL == "" && l.Path == "":
			ps.add(path+".url", CodeRequired, "missing: a list has a url or a path")
		case l.URL != "":
			u, err := url.Parse(l.URL)
			switch {
			case err != nil || u.Host == "":
				ps.add(path+".url", CodeInvalidURL, "%q: not an absolute URL", l.URL)
			case u.Scheme != "http" && u.Scheme != "https":
				ps.add(path+".url", CodeUnsupportedScheme, "scheme %q: want http:// or https://", u.Scheme)
			case u.User != nil:
				ps.add(path+".url", CodeUserinfo, "userinfo (user@ or user:password@) is not allowed")
			}
			if f.StateDir == "" {
				ps.add(path+".url", CodeStateDirRequired, "a downloaded list needs filter.state_dir, where its last good copy is kept for the next start")
			}
		case !filepath.IsAbs(l.Path):
			ps.add(path+".path", CodeInvalidPath, "%q: want an absolute path", l.Path)
		}
		switch l.Kind {
		case "", ListBlock, ListAllow:
		default:
			ps.add(path+".kind", CodeInvalidChoice, "%q: want block or allow", l.Kind)
		}
	}
	known := map[string]bool{}
	for _, c := range clients {
		known[c.Name] = true
	}
	groups := map[string]int{}
	for i, g := range f.Groups {
		path := fmt.Sprintf("filter.groups[%d]", i)
		if g.Name == "" {
			ps.add(path+".name", CodeRequired, "missing: a group has a name")
		} else if j, dup := groups[g.Name]; dup {
			ps.add(path+".name", CodeDuplicate, "%q is already filter.groups[%d].name", g.Name, j)
		} else {
			groups[g.Name] = i
		}
		for k, c := range g.Clients {
			if _, err := netip.ParseAddr(c); err == nil {
				continue
			}
			if _, err := netip.ParsePrefix(c); err == nil {
				continue
			}
			if !known[c] {
				ps.add(fmt.Sprintf("%s.clients[%d]", path, k), CodeUnknownClient,
					"%q is not an IP address, a CIDR prefix or a [[clients]] name", c)
			}
		}
		for k, l := range g.Lists {
			if _, ok := names[l]; !ok {
				ps.add(fmt.Sprintf("%s.lists[%d]", path, k), CodeUnknownList, "%q is not a filter.lists name", l)
			}
		}
		for k, w := range g.Schedule {
			checkWindow(ps, fmt.Sprintf("%s.schedule[%d]", path, k), w)
		}
		checkGroupSwitches(ps, path, g)
	}
}

func checkWindow(ps *Problems, path string, w Window) {
	for i, d := range w.Days {
		if !contains(Days, strings.ToLower(d)) {
			ps.add(fmt.Sprintf("%s.days[%d]", path, i), CodeInvalidSchedule, "%q: want one of %s", d, strings.Join(Days, ", "))
		}
	}
	from, okFrom := ParseClock(w.From)
	if !okFrom || from == 24*60 {
		ps.add(path+".from", CodeInvalidSchedule, "%q: want HH:MM, 00:00 to 23:59", w.From)
	}
	to, okTo := ParseClock(w.To)
	if !okTo {
		ps.add(path+".to", CodeInvalidSchedule, "%q: want HH:MM, 00:00 to 24:00", w.To)
	}
	if okFrom && okTo && from == to {
		ps.add(path+".to", CodeInvalidSchedule, "from and to are both %s: an empty window", w.From)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func validListName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
