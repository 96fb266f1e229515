package dashboard

import (
	"net/http"
	"strconv"
)

// change is one entry of the dashboard's layer over the configuration
// (docs/dashboard.md "Changes made here"): something changed from the
// dashboard, kept in filter.state_dir, that the configuration file does
// not say. The page shows the TOML and the NixOS option that would make
// it permanent, and a button that drops it from the layer. The
// configuration file is never rewritten: it stays the source of truth.
type change struct {
	Kind  string // "allow" or "block"
	What  string // in words
	TOML  string // the lines to add to the configuration file
	Nix   string // the NixOS module's equivalent
	Drop  string // the mutating route that drops it
	Name  string // its parameter
	Later string // the words of the drop button
	// Skipped is why a layer entry (manage.go) does not apply; "" it does.
	Skipped string
	// Switches, for a group's switches changed on the groups page, are
	// its drop buttons, one a switch (instead of Drop).
	Switches []switchDrop
}

// changes are the layer's entries, allowed names first, each sorted.
func (d *Dashboard) changes() []change {
	var out []change
	add := func(kind, verb string, names []string, drop string) {
		for _, n := range names {
			rule := strconv.Quote("||" + n + "^")
			out = append(out, change{
				Kind: kind,
				What: n + " and the names below it " + verb + " for every device",
				TOML: "[filter]\n" + kind + " = [" + rule + "]  # add to the list if it exists",
				Nix:  "services.nxdns.settings.filter." + kind + " = [ " + rule + " ];",
				Drop: drop, Name: n, Later: "Drop (" + kind + " no more)",
			})
		}
	}
	if d.deps.Allowed != nil {
		add("allow", "allowed", d.deps.Allowed(), "/api/filter/allow/remove")
	}
	if d.deps.Blocked != nil {
		add("block", "blocked", d.deps.Blocked(), "/api/filter/block/remove")
	}
	return append(append(out, d.layerChanges()...), d.switchChanges()...)
}

func (d *Dashboard) pageChanges(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, "changes", "Changes made here", http.StatusOK, map[string]any{"Changes": d.changes(), "LayerError": d.layerError()})
}

// layerError is why the layer file is ignored as a whole; "" when it is not.
func (d *Dashboard) layerError() string {
	if d.deps.Layer == nil {
		return ""
	}
	return d.deps.Layer().State.Err
}
