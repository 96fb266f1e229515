package dashboard

import (
	"cmp"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/nxdns/nxdns/internal/catalog"
	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/devices"
)

// The manage page (docs/dashboard.md "Manage lists and groups"): add,
// switch off and remove lists, make groups of devices with a schedule,
// blocked services and safe search. Every change goes to the
// configuration layer (config.Layer, kept in filter.state_dir, merged over
// the file at every start and reload) through the /api/filter/layer
// routes, and shows on "Changes made here" as the TOML that would make it
// permanent.

// LayerInfo is the layer and the configurations it sits between.
type LayerInfo struct {
	State     config.LayerState
	File      config.Config // the configuration file's
	Effective config.Config // the file with the layer merged: what runs
}

// LayerAnswer is what GET /api/filter/layer and every change of the
// layer answer (internal/app layer.go).
type LayerAnswer struct {
	State config.LayerState `json:"state"`
	// Item is the entry a change was about ("list ads", "group kids"),
	// Changed whether it changed anything.
	Item    string `json:"item,omitempty"`
	Changed bool   `json:"changed"`
}

// manageList is one list on the manage page.
type manageList struct {
	Name, Source, Kind string
	Added              bool // by the dashboard (else the file's)
	On                 bool
	Downloaded         bool
}

// manageGroup is one group on the manage page.
type manageGroup struct {
	config.LayerGroup
	Added    bool   // by the dashboard
	Skipped  string // why the layer's group does not apply; "" it does
	When     string // its schedule in words
	Devices  string // comma-separated, for the edit form
	Lists    string
	Services string
	Safe     string
	Days     string
	From, To string
}

// windowsText is a schedule in words.
func windowsText(ws []config.Window) string {
	if len(ws) == 0 {
		return "always"
	}
	var parts []string
	for _, w := range ws {
		days := "every day"
		if len(w.Days) > 0 {
			days = strings.Join(w.Days, ", ")
		}
		parts = append(parts, days+" "+w.From+"–"+w.To)
	}
	return strings.Join(parts, "; ")
}

func (d *Dashboard) pageManage(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if d.deps.Layer == nil {
		d.render(w, r, "manage", "Manage lists & groups", http.StatusOK, data)
		return
	}
	li := d.deps.Layer()
	st := li.State
	skipped := map[string]string{}
	for _, s := range st.Skips {
		skipped[s.Item] = s.Reason
	}
	var lists []manageList
	for _, x := range li.File.Filter.Lists {
		lists = append(lists, manageList{Name: x.Name, Source: cmp.Or(x.URL, x.Path), Kind: cmp.Or(x.Kind, config.ListBlock),
			On: !slices.Contains(st.Layer.ListsOff, x.Name), Downloaded: x.URL != ""})
	}
	for _, x := range st.Layer.Lists {
		if _, skip := skipped["list "+x.Name]; skip && !x.Disabled {
			continue // shown with its reason below
		}
		lists = append(lists, manageList{Name: x.Name, Source: x.URL, Kind: cmp.Or(x.Kind, config.ListBlock),
			Added: true, On: !x.Disabled, Downloaded: true})
	}
	var groups []manageGroup
	for _, g := range li.File.Filter.Groups {
		groups = append(groups, manageGroup{LayerGroup: config.LayerGroup{Name: g.Name, Devices: g.Clients, Lists: g.Lists},
			When: windowsText(g.Schedule)})
	}
	for _, g := range st.Layer.Groups {
		v := manageGroup{LayerGroup: g, Added: true, Skipped: skipped["group "+g.Name], When: windowsText(g.Schedule),
			Devices: strings.Join(g.Devices, ", "), Lists: strings.Join(g.Lists, ", "), Services: strings.Join(g.Services, ", "),
			Safe: strings.Join(g.SafeSearch, ", ")}
		if len(g.Schedule) > 0 {
			v.Days, v.From, v.To = strings.Join(g.Schedule[0].Days, ", "), g.Schedule[0].From, g.Schedule[0].To
		}
		groups = append(groups, v)
	}
	data["Lists"], data["Groups"], data["Skips"], data["LayerError"] = lists, groups, st.Skips, st.Err
	data["NoStateDir"] = st.Path == ""
	data["Engines"], data["Modes"] = catalog.Engines, []string{catalog.YouTubeStrict, catalog.YouTubeModerate}
	d.render(w, r, "manage", "Manage lists & groups", http.StatusOK, data)
}

// layerChanges are the layer's entries for the "changes made here" page.
func (d *Dashboard) layerChanges() []change {
	if d.deps.Layer == nil {
		return nil
	}
	li := d.deps.Layer()
	st := li.State
	skipped := map[string]string{}
	for _, s := range st.Skips {
		skipped[s.Item] = s.Reason
	}
	var out []change
	for _, x := range st.Layer.Lists {
		c := change{Kind: "list", Name: x.Name, What: "list " + x.Name + " (" + x.URL + ") added",
			TOML: x.TOML(), Nix: x.Nix(), Drop: "/api/filter/layer/lists/remove", Later: "Drop (remove the list)",
			Skipped: skipped["list "+x.Name]}
		if x.Disabled {
			c.What += ", switched off"
			c.TOML, c.Nix = "# nothing to add while it is switched off", "# nothing to add while it is switched off"
		}
		out = append(out, c)
	}
	for _, n := range st.Layer.ListsOff {
		out = append(out, change{Kind: "list", Name: n, What: "list " + n + " of the configuration file switched off",
			TOML: config.OffTOML(n), Nix: "# remove the list named " + n + " from services.nxdns.settings.filter.lists and from every group's lists",
			Drop: "/api/filter/layer/lists/remove", Later: "Drop (switch the list on again)", Skipped: skipped["list "+n]})
	}
	// The [[clients]] entries the layer made, not the file's: a MAC's
	// entry mac-… already in the file (pasted from another group's lines)
	// is not shown again, which pasted would be a duplicate name.
	made := li.Effective
	made.Clients = slices.DeleteFunc(slices.Clone(made.Clients), func(cl config.Client) bool {
		return slices.ContainsFunc(li.File.Clients, func(f config.Client) bool { return f.Name == cl.Name })
	})
	// A MAC in two groups has one entry: the first group's lines carry it
	// and the later ones say where it is, so pasting them all makes no
	// duplicate name.
	shownIn := map[string]string{} // [[clients]] name → the group whose lines have it
	for _, g := range st.Layer.Groups {
		why := skipped["group "+g.Name]
		eff := made
		if why != "" {
			eff = config.Config{} // not applied: the entry as the layer has it, not a file group of its name
		}
		var elsewhere []string
		eff.Clients = slices.DeleteFunc(slices.Clone(eff.Clients), func(cl config.Client) bool {
			in, ok := shownIn[cl.Name]
			if ok && in != g.Name {
				elsewhere = append(elsewhere, "# the [[clients]] entry "+config.QuoteTOML(cl.Name)+" is in group "+in+"'s lines\n")
			}
			return ok
		})
		toml, nix := g.GroupTOML(eff), g.GroupNix(eff)
		for _, d := range g.Devices {
			if hw, err := net.ParseMAC(d); err == nil && slices.ContainsFunc(eff.Clients, func(cl config.Client) bool { return cl.Name == config.MACClientName(hw) }) {
				shownIn[config.MACClientName(hw)] = g.Name
			}
		}
		note := strings.Join(elsewhere, "")
		out = append(out, change{Kind: "group", Name: g.Name, What: "group " + g.Name + ": " + strings.Join(g.Devices, ", ") + ", " + windowsText(g.Schedule),
			TOML: note + toml, Nix: note + nix, Drop: "/api/filter/layer/groups/remove",
			Later: "Drop (remove the group)", Skipped: why})
	}
	return out
}

// layerGroups are the names of the groups made from the dashboard, the
// devices page's "put in group" choices.
func (d *Dashboard) layerGroups() []string {
	if d.deps.Layer == nil {
		return nil
	}
	var out []string
	for _, g := range d.deps.Layer().State.Layer.Groups {
		out = append(out, g.Name)
	}
	return out
}

// deviceGroups is a devices page row's "put in group" form: the device as
// a group names it (its MAC; a ClientID device by its [[clients]] name,
// none without one) and the groups it can be put in.
func deviceGroups(dev devices.Device, groups []string) map[string]any {
	id := dev.MAC
	if id == "" && dev.Configured {
		id = dev.Name
	}
	return map[string]any{"Device": id, "Groups": groups}
}

// switchDrop is one switch changed on the groups page, and the
// data-switch button (static/switches.js) that puts it back to the
// configuration.
type switchDrop struct {
	Group, Kind, ID, Label string
}

// switchChanges are the groups' switches changed on the groups page
// (dashboard-switches.json), one entry a group: the services and
// safe_search lines the group's [[filter.groups]] entry would have with
// them, and a "back to the configuration" button each.
func (d *Dashboard) switchChanges() []change {
	if d.deps.Groups == nil {
		return nil
	}
	var out []change
	for _, g := range d.deps.Groups() {
		ov := g.Overrides
		if len(ov.Services) == 0 && len(ov.SafeSearch) == 0 {
			continue
		}
		c := change{Kind: "switches", Name: g.Name}
		var words []string
		apply := func(kind string, configured []string, over map[string]bool, on, off string) []string {
			out := slices.Clone(configured)
			for _, id := range slices.Sorted(maps.Keys(over)) {
				state := off
				if over[id] {
					state = on
					if !slices.Contains(out, id) {
						out = append(out, id)
					}
				} else {
					out = slices.DeleteFunc(out, func(x string) bool { return x == id })
				}
				words = append(words, id+" "+state)
				c.Switches = append(c.Switches, switchDrop{Group: g.Name, Kind: kind, ID: id, Label: "Drop (" + id + " back to the configuration)"})
			}
			slices.Sort(out)
			return out
		}
		services := apply("service", g.Configured.Services, ov.Services, "blocked", "allowed")
		safe := apply("safe_search", g.Configured.SafeSearch, ov.SafeSearch, "safe search forced", "safe search off")
		c.What = "group " + g.Name + ": switches changed on the Groups page: " + strings.Join(words, ", ")
		c.TOML = "# in the [[filter.groups]] entry with name = " + config.QuoteTOML(g.Name) + ":\nservices = " + config.TOMLList(services) + "\nsafe_search = " + config.TOMLList(safe)
		c.Nix = "# in the services.nxdns.settings.filter.groups entry with name = " + config.QuoteNix(g.Name) + ":\nservices = " + config.NixList(services) + ";\nsafe_search = " + config.NixList(safe) + ";"
		out = append(out, c)
	}
	return out
}
