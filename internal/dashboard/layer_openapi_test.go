package dashboard

// layerDocs document the configuration layer's routes (internal/app
// layer.go; docs/dashboard.md "Manage lists and groups"), as cacheDocs
// the cache's. Every change answers the layer as it is afterwards.
var layerDocs = map[string]struct {
	summary  string
	params   [][2]string
	body     any
	mutating bool
}{
	"GET /api/filter/layer": {"The dashboard's configuration layer as kept in filter.state_dir (lists added, file lists switched off, groups made), the entries skipped and why, and why the layer file is ignored if it cannot be read.",
		nil, LayerAnswer{}, false},
	"POST /api/filter/layer/lists": {"Adds a downloaded list to the layer, or replaces the layer's list of that name (last write wins); it is downloaded at once. A name the configuration file has is refused.",
		[][2]string{{"name", "The list's name: 1 to 64 letters, digits, '-', '_' or '.'. Required."}, {"url", "An http:// or https:// URL. Required."}, {"kind", "block (default) or allow."}}, LayerAnswer{}, true},
	"POST /api/filter/layer/lists/remove": {"Drops the layer's entry for a list: a list added is removed, a file's list switched off is on again.",
		[][2]string{{"name", "The list's name. Required."}}, LayerAnswer{}, true},
	"POST /api/filter/layer/lists/enable": {"Switches a list on or off: a file's list through the layer's lists_off, a list added through its disabled flag. A list switched off is left out of every group's lists too.",
		[][2]string{{"name", "The list's name. Required."}, {"on", "true or false. Required."}}, LayerAnswer{}, true},
	"POST /api/filter/layer/groups": {"Makes a group, or replaces the layer's group of that name (last write wins). With Content-Type application/json the body is the group as the layer file keeps it (every window of its schedule); otherwise the parameters. A name the configuration file has, as a group or a [[clients]] name, is refused.",
		[][2]string{{"name", "The group's name: 1 to 64 letters, digits, '-', '_' or '.'. Required."}, {"devices", "Comma-separated addresses, CIDR prefixes, MAC addresses or [[clients]] names."},
			{"lists", "Comma-separated list names."}, {"services", "Comma-separated catalogue ids (GET /api/filter/services)."}, {"safe_search", "Comma-separated engines: google, bing, duckduckgo, youtube."},
			{"youtube_mode", "strict (default) or moderate."}, {"days", "Comma-separated days of the schedule's window (mon … sun); absent: every day."}, {"from", "The window's start, HH:MM; absent with to: always."}, {"to", "The window's end, HH:MM (24:00 the end of the day; before from: past midnight)."}},
		LayerAnswer{}, true},
	"POST /api/filter/layer/groups/device": {"Puts a device in a group made from the dashboard, or takes it out (the devices page's \"put in group\"). A group of the configuration file is refused: its clients are the file's.",
		[][2]string{{"name", "The group's name. Required."}, {"device", "An address, CIDR prefix, MAC address or [[clients]] name. Required."}, {"in", "true (put in) or false (take out). Required."}}, LayerAnswer{}, true},
	"POST /api/filter/layer/groups/remove": {"Drops a group made from the dashboard.",
		[][2]string{{"name", "The group's name. Required."}}, LayerAnswer{}, true},
}
