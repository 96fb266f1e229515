package config

import (
	"fmt"
	"strings"
)

// The layer's entries as the configuration file's TOML and the NixOS
// module's settings that would make them permanent (docs/dashboard.md
// "Changes made here"): pasted at the end of the file, reloaded, and the
// entry dropped from the layer, the answers stay the same.

// tomlString quotes s as a TOML basic string; control characters, which
// validation refuses in every name and URL, are escaped as \u.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// nixString quotes s as a Nix string: \ " and the interpolation ${
// escaped, and the control characters Nix has escapes for; validation
// refuses the others in every name and URL.
func nixString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "${", `\${`, "\n", `\n`, "\r", `\r`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}

func tomlStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = tomlString(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func nixStrings(ss []string) string {
	if len(ss) == 0 {
		return "[ ]"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = nixString(s)
	}
	return "[ " + strings.Join(q, " ") + " ]"
}

// QuoteTOML and QuoteNix quote s for the "changes made here" page's
// lines; TOMLList and NixList quote a list of strings (NixList with its
// brackets).
func QuoteTOML(s string) string   { return tomlString(s) }
func QuoteNix(s string) string    { return nixString(s) }
func TOMLList(ss []string) string { return tomlStrings(ss) }
func NixList(ss []string) string  { return nixStrings(ss) }

// TOML is the [[filter.lists]] entry of a list added from the dashboard.
func (x LayerList) TOML() string {
	kind := ""
	if x.Kind != "" {
		kind = "kind = " + tomlString(x.Kind) + "\n"
	}
	return "[[filter.lists]]\nname = " + tomlString(x.Name) + "\nurl = " + tomlString(x.URL) + "\n" + kind
}

// Nix is the same for the NixOS module.
func (x LayerList) Nix() string {
	kind := ""
	if x.Kind != "" {
		kind = " kind = " + nixString(x.Kind) + ";"
	}
	return "services.nxdns.settings.filter.lists = [ { name = " + nixString(x.Name) + "; url = " + nixString(x.URL) + ";" + kind + " } ];"
}

// GroupTOML is a layer group as it applies (eff, the effective
// configuration, names the [[clients]] entries made for its MAC
// addresses): those entries, then the [[filter.groups]] entry.
func (g LayerGroup) GroupTOML(eff Config) string {
	var b strings.Builder
	for _, cl := range g.madeClients(eff) {
		fmt.Fprintf(&b, "[[clients]]\nname = %s\nmac = %s\n\n", tomlString(cl.Name), tomlString(cl.MAC))
	}
	fg := g.asGroup(eff)
	fmt.Fprintf(&b, "[[filter.groups]]\nname = %s\n", tomlString(fg.Name))
	fmt.Fprintf(&b, "clients = %s\n", tomlStrings(fg.Clients))
	fmt.Fprintf(&b, "lists = %s\n", tomlStrings(fg.Lists))
	if len(fg.Services) > 0 {
		fmt.Fprintf(&b, "services = %s\n", tomlStrings(fg.Services))
	}
	if len(fg.SafeSearch) > 0 {
		fmt.Fprintf(&b, "safe_search = %s\n", tomlStrings(fg.SafeSearch))
	}
	if fg.YouTubeMode != "" {
		fmt.Fprintf(&b, "youtube_mode = %s\n", tomlString(fg.YouTubeMode))
	}
	for _, w := range fg.Schedule {
		fmt.Fprintf(&b, "[[filter.groups.schedule]]\n")
		if len(w.Days) > 0 {
			fmt.Fprintf(&b, "days = %s\n", tomlStrings(w.Days))
		}
		fmt.Fprintf(&b, "from = %s\nto = %s\n", tomlString(w.From), tomlString(w.To))
	}
	return b.String()
}

// GroupNix is GroupTOML for the NixOS module.
func (g LayerGroup) GroupNix(eff Config) string {
	var b strings.Builder
	for _, cl := range g.madeClients(eff) {
		fmt.Fprintf(&b, "services.nxdns.settings.clients = [ { name = %s; mac = %s; } ];\n", nixString(cl.Name), nixString(cl.MAC))
	}
	fg := g.asGroup(eff)
	fmt.Fprintf(&b, "services.nxdns.settings.filter.groups = [ {\n  name = %s;\n  clients = %s;\n  lists = %s;\n",
		nixString(fg.Name), nixStrings(fg.Clients), nixStrings(fg.Lists))
	if len(fg.Services) > 0 {
		fmt.Fprintf(&b, "  services = %s;\n", nixStrings(fg.Services))
	}
	if len(fg.SafeSearch) > 0 {
		fmt.Fprintf(&b, "  safe_search = %s;\n", nixStrings(fg.SafeSearch))
	}
	if fg.YouTubeMode != "" {
		fmt.Fprintf(&b, "  youtube_mode = %s;\n", nixString(fg.YouTubeMode))
	}
	if len(fg.Schedule) > 0 {
		b.WriteString("  schedule = [")
		for _, w := range fg.Schedule {
			fmt.Fprintf(&b, " { days = %s; from = %s; to = %s; }", nixStrings(w.Days), nixString(w.From), nixString(w.To))
		}
		b.WriteString(" ];\n")
	}
	b.WriteString("} ];")
	return b.String()
}

// asGroup is the group's entry in eff, or as the layer says when it was
// skipped.
func (g LayerGroup) asGroup(eff Config) FilterGroup {
	for i := len(eff.Filter.Groups) - 1; i >= 0; i-- {
		if eff.Filter.Groups[i].Name == g.Name {
			return eff.Filter.Groups[i]
		}
	}
	return FilterGroup{Name: g.Name, Clients: g.Devices, Lists: g.Lists, Schedule: g.Schedule,
		Services: g.Services, SafeSearch: g.SafeSearch, YouTubeMode: g.YouTubeMode}
}

// madeClients are the [[clients]] entries eff has for g's MAC addresses
// that the layer made (named MACClientName).
func (g LayerGroup) madeClients(eff Config) []Client {
	var out []Client
	for _, d := range g.Devices {
		hw, ok := layerMAC(d)
		if !ok {
			continue
		}
		for _, cl := range eff.Clients {
			if cl.Name == MACClientName(hw) && cl.MAC == hw.String() {
				out = append(out, cl)
				break
			}
		}
	}
	return out
}

// OffTOML says how to make a list switched off permanent: there is no key
// for it, the entry is removed from the file.
func OffTOML(name string) string {
	return "# remove the [[filter.lists]] entry with name = " + tomlString(name) +
		"\n# and " + tomlString(name) + " from every group's lists\n"
}
