package dashboard

import (
	"net/http"
	"slices"
	"strings"

	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/history"
)

// The groups page: each [[filter.groups]] group's blocked services and
// safe search, each a switch that POST /api/filter/groups/switch turns
// over the configuration (docs/dashboard.md "Groups"; docs/filter.md
// "Blocked services").

// switchView is one switch of one group as the page shows it.
type switchView struct {
	ID, Name   string
	On         bool // in force now (inside the group's schedule)
	Configured bool // what the configuration says
	Overridden bool // changed from the dashboard: "back to the configuration" applies
}

type groupView struct {
	Name        string
	Scheduled   bool
	YouTubeMode string
	SafeSearch  []switchView
	Services    []switchView
	Blocking    int // services on
}

func (d *Dashboard) pageGroups(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if d.deps.Groups == nil || d.deps.Services == nil {
		d.render(w, r, "groups", "Groups", http.StatusOK, data)
		return
	}
	cat := d.deps.Services()
	var views []groupView
	for _, g := range d.deps.Groups() {
		v := groupView{Name: g.Name, Scheduled: g.Scheduled, YouTubeMode: g.YouTubeMode}
		for _, e := range cat.Engines {
			_, over := g.Overrides.SafeSearch[e]
			v.SafeSearch = append(v.SafeSearch, switchView{ID: e, Name: e, On: slices.Contains(g.SafeSearch, e),
				Configured: slices.Contains(g.Configured.SafeSearch, e), Overridden: over})
		}
		for _, s := range cat.Services {
			_, over := g.Overrides.Services[s.ID]
			sv := switchView{ID: s.ID, Name: s.Name, On: slices.Contains(g.Services, s.ID),
				Configured: slices.Contains(g.Configured.Services, s.ID), Overridden: over}
			if sv.On {
				v.Blocking++
			}
			v.Services = append(v.Services, sv)
		}
		views = append(views, v)
	}
	data["Groups"], data["CatalogueVersion"] = views, cat.Version
	d.render(w, r, "groups", "Groups", http.StatusOK, data)
}

// switchWhy is Why for a row a group's switch decided: a blocked service
// (list service:ID, rule the domain) or a safe-search rewrite.
func switchWhy(r history.Row) (string, bool) {
	group := ""
	if r.Filter.Group != "" {
		group = " for group " + r.Filter.Group
	}
	switch {
	case r.Filter.Blocked && strings.HasPrefix(r.Filter.List, filter.ServiceListPrefix):
		return "blocked service: " + strings.TrimPrefix(r.Filter.List, filter.ServiceListPrefix) + " (domain " + r.Filter.Rule + ")" + group, true
	case r.Filter.List == filter.SafeSearchList:
		return "safe search: " + r.Filter.Rule + group, true
	}
	return "", false
}
