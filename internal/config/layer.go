package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/nxdns/nxdns/internal/safefile"
)

// The dashboard's configuration layer (docs/reference/configuration.md
// "The dashboard's layer"; docs/dashboard.md "Changes made here"): lists
// added, lists switched off and groups created from the dashboard, kept in
// LayerFile under filter.state_dir. It is merged over the configuration
// file at every start and reload — the file first, the layer on top — and
// never written into the file: the file stays the source of truth, and the
// "changes made here" page shows each entry as the TOML that would make it
// permanent.

// LayerFile is the layer's file under filter.state_dir. A list's files are
// NAME.list and NAME.meta.json, so no list name collides with it.
const LayerFile = "dashboard-config.json"

// Bounds of the layer: a household adds a few lists and groups; the caps
// keep a script or a damaged file from growing memory without bound.
const (
	MaxLayerBytes   = 1 << 20
	MaxLayerGroups  = 256
	MaxLayerMembers = 256 // devices in one layer group
	MaxLayerOff     = MaxFilterLists
)

// Layer is the file's content.
type Layer struct {
	// Lists are downloaded lists added from the dashboard (url only: a
	// local file is the configuration file's to name).
	Lists []LayerList `json:"lists,omitempty"`
	// ListsOff names lists of the configuration file switched off: they
	// are left out of the effective configuration, and out of every
	// group's lists.
	ListsOff []string `json:"lists_off,omitempty"`
	// Groups are groups created from the dashboard, after the file's.
	Groups []LayerGroup `json:"groups,omitempty"`
}

// LayerList is one list added from the dashboard.
type LayerList struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Kind     string `json:"kind,omitempty"` // "block" (default) or "allow"
	Disabled bool   `json:"disabled,omitempty"`
}

// LayerGroup is one group created from the dashboard: a [[filter.groups]]
// entry whose devices may also be MAC addresses.
type LayerGroup struct {
	Name string `json:"name"`
	// Devices are addresses, CIDR prefixes, [[clients]] names or MAC
	// addresses. A MAC no [[clients]] entry has becomes one named
	// MACClientName(mac) in the effective configuration.
	Devices     []string `json:"devices,omitempty"`
	Lists       []string `json:"lists,omitempty"`
	Schedule    []Window `json:"schedule,omitempty"`
	Services    []string `json:"services,omitempty"`
	SafeSearch  []string `json:"safe_search,omitempty"`
	YouTubeMode string   `json:"youtube_mode,omitempty"`
}

// LayerSkip is one layer entry left out of the effective configuration,
// and why; Item names it ("list ads", "group kids").
type LayerSkip struct {
	Item   string `json:"item"`
	Reason string `json:"reason"`
}

func (s LayerSkip) String() string { return s.Item + ": " + s.Reason }

// LayerState is the layer as read from the state directory, and what
// merging it did: the running daemon's and `nxdns check`'s view.
type LayerState struct {
	Path  string      `json:"path"`  // "" without filter.state_dir: no layer
	Layer Layer       `json:"layer"` // as read (entries skipped included)
	Err   string      `json:"error,omitempty"`
	Skips []LayerSkip `json:"skipped,omitempty"`
}

// ReadLayerFile reads a layer file with safefile.ReadFile (a regular file
// of at most MaxLayerBytes: docs/design.md#file-reads). A missing file is
// an empty layer and no error; a damaged one is an error naming the file,
// and the caller ignores the layer as a whole (the file's configuration
// alone applies).
func ReadLayerFile(path string) (Layer, error) {
	b, err := safefile.ReadFile(path, MaxLayerBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Layer{}, nil
	}
	if err != nil {
		return Layer{}, err
	}
	var l Layer
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return Layer{}, fmt.Errorf("%s: not a layer file (edited by hand?), ignored until fixed or removed: %w", path, err)
	}
	return l, nil
}

// LayerPath is the layer file of stateDir; "" without one.
func LayerPath(stateDir string) string {
	if stateDir == "" {
		return ""
	}
	return filepath.Join(stateDir, LayerFile)
}

// MACClientName is the [[clients]] name a layer group's MAC address gets
// when the file names no device with it: "mac-aabbccddeeff".
func MACClientName(hw net.HardwareAddr) string {
	return "mac-" + strings.ReplaceAll(hw.String(), ":", "")
}

// origin is what made an entry of the effective configuration.
type origin struct {
	item   string
	client bool // a [[clients]] entry made for a MAC; item is its group
}

var problemIndex = regexp.MustCompile(`^(filter\.lists|filter\.groups|clients)\[(\d+)\]`)

// Apply merges l over file, a configuration that validated on its own,
// and returns the effective configuration and the entries left out.
// Every entry is validated as the file is (Validate): one that fails is
// reported by name and skipped, and the rest applies. A list or group
// whose name the file has is refused. The result always validates: if
// the layer makes the file's own entries invalid in a way no entry can
// be blamed for, the whole layer is skipped.
func (l Layer) Apply(file Config) (Config, []LayerSkip) {
	var skips []LayerSkip
	skip := func(item, format string, args ...any) {
		skips = append(skips, LayerSkip{Item: item, Reason: fmt.Sprintf(format, args...)})
	}
	c := file
	c.Filter.Lists = slices.Clone(file.Filter.Lists)
	c.Clients = slices.Clone(file.Clients)
	c.Filter.Groups = make([]FilterGroup, 0, len(file.Filter.Groups)+len(l.Groups))
	fileLists, fileGroups, fileClients := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, x := range file.Filter.Lists {
		fileLists[x.Name] = true
	}
	for _, g := range file.Filter.Groups {
		fileGroups[g.Name] = true
	}
	byMAC := map[string]string{}
	for _, cl := range file.Clients {
		fileClients[cl.Name] = true
		if hw, ok := ParseClientMAC(cl.MAC); ok {
			byMAC[hw.String()] = cl.Name
		}
	}

	// Lists switched off: out of the lists and out of every group.
	off := map[string]bool{}
	for i, n := range l.ListsOff {
		switch {
		case i >= MaxLayerOff:
			skip("list "+n, "more than %d lists switched off", MaxLayerOff)
		case !fileLists[n]:
			skip("list "+n, "switched off, but the configuration file has no list of that name (any more)")
		default:
			off[n] = true
		}
	}
	c.Filter.Lists = slices.DeleteFunc(c.Filter.Lists, func(x FilterList) bool { return off[x.Name] })

	// Lists added; the last entry of a name wins (last write wins).
	disabled := map[string]bool{}
	lists := lastWins(l.Lists, func(x LayerList) string { return x.Name })
	var origins []origin // of c.Filter.Lists[nFile:], then groups, then clients
	nFile := len(c.Filter.Lists)
	for _, x := range lists {
		item := "list " + x.Name
		switch {
		case fileLists[x.Name]:
			skip(item, "the configuration file has a list named %q: change it there, or give this one another name", x.Name)
		case x.Disabled:
			disabled[x.Name] = true
		case len(c.Filter.Lists) >= MaxFilterLists:
			skip(item, "%d lists already, at most %d", len(c.Filter.Lists), MaxFilterLists)
		case x.URL == "":
			skip(item, "a list added from the dashboard has a url (http:// or https://)")
		default:
			c.Filter.Lists = append(c.Filter.Lists, FilterList{Name: x.Name, URL: x.URL, Kind: x.Kind})
			origins = append(origins, origin{item: item})
		}
	}
	dropRefs := func(names []string) []string {
		return slices.DeleteFunc(slices.Clone(names), func(n string) bool { return off[n] || disabled[n] })
	}
	for _, g := range file.Filter.Groups {
		g.Lists = dropRefs(g.Lists)
		c.Filter.Groups = append(c.Filter.Groups, g)
	}

	// Groups created; the last entry of a name wins.
	groups := lastWins(l.Groups, func(g LayerGroup) string { return g.Name })
	nFileGroups := len(c.Filter.Groups)
	var clientOrigins []origin
	for i, g := range groups {
		item := "group " + g.Name
		switch {
		case i >= MaxLayerGroups:
			skip(item, "more than %d groups made from the dashboard", MaxLayerGroups)
			continue
		case !validListName(g.Name):
			skip(item, "%.80q: a group made from the dashboard is named with 1 to 64 letters, digits, '-', '_' or '.'", g.Name)
			continue
		case fileGroups[g.Name]:
			skip(item, "the configuration file has a group named %q: change it there (its switches can be changed on the Groups page), or give this one another name", g.Name)
			continue
		case fileClients[g.Name]:
			skip(item, "the configuration file has a device ([[clients]]) named %q: a device and a group must not share a name", g.Name)
			continue
		case len(g.Devices) > MaxLayerMembers:
			skip(item, "%d devices, at most %d", len(g.Devices), MaxLayerMembers)
			continue
		}
		fg := FilterGroup{Name: g.Name, Lists: dropRefs(g.Lists), Schedule: g.Schedule,
			Services: g.Services, SafeSearch: g.SafeSearch, YouTubeMode: g.YouTubeMode}
		for _, d := range g.Devices {
			if hw, ok := layerMAC(d); ok {
				name, known := byMAC[hw.String()]
				if !known {
					name = MACClientName(hw)
					byMAC[hw.String()] = name
					c.Clients = append(c.Clients, Client{Name: name, MAC: hw.String()})
					clientOrigins = append(clientOrigins, origin{item: item, client: true})
				}
				d = name
			}
			fg.Clients = append(fg.Clients, d)
		}
		c.Filter.Groups = append(c.Filter.Groups, fg)
		origins = append(origins, origin{item: item})
	}
	nLayerLists := len(c.Filter.Lists) - nFile
	nFileClients := len(file.Clients)

	// Validate as the file is, and leave out each entry a problem points
	// at, until none does. Each round removes at least one entry.
	for {
		ps := Validate(c)
		if len(ps) == 0 {
			return c, skips
		}
		bad := map[string][]string{}
		blameless := false
		for _, p := range ps {
			m := problemIndex.FindStringSubmatch(p.Path)
			if m == nil {
				blameless = true
				break
			}
			i, _ := strconv.Atoi(m[2])
			var o origin
			switch {
			case m[1] == "filter.lists" && i >= nFile && i-nFile < nLayerLists:
				o = origins[i-nFile]
			case m[1] == "filter.groups" && i >= nFileGroups:
				o = origins[nLayerLists+i-nFileGroups]
			case m[1] == "clients" && i >= nFileClients:
				o = clientOrigins[i-nFileClients]
			default:
				blameless = true
			}
			if blameless {
				break
			}
			// The key within the entry, not the effective configuration's
			// index, which the layer file does not have.
			key := strings.TrimPrefix(p.Path[len(m[0]):], ".")
			if key == "" {
				key = "name"
			}
			bad[o.item] = append(bad[o.item], key+": "+p.Message)
		}
		if blameless {
			skip("the whole layer", "together with the configuration file it is not valid (%s); the file alone applies", ps[0].String())
			return file, skips
		}
		// Rebuild without the entries blamed.
		var keepLists []FilterList
		var keepOrigins []origin
		for i, x := range c.Filter.Lists[nFile:] {
			if _, b := bad[origins[i].item]; !b {
				keepLists = append(keepLists, x)
				keepOrigins = append(keepOrigins, origins[i])
			}
		}
		var keepGroups []FilterGroup
		for i, g := range c.Filter.Groups[nFileGroups:] {
			if _, b := bad[origins[nLayerLists+i].item]; !b {
				keepGroups = append(keepGroups, g)
				keepOrigins = append(keepOrigins, origins[nLayerLists+i])
			}
		}
		var keepClients []Client
		var keepClientOrigins []origin
		for i, cl := range c.Clients[nFileClients:] {
			if _, b := bad[clientOrigins[i].item]; !b {
				keepClients = append(keepClients, cl)
				keepClientOrigins = append(keepClientOrigins, clientOrigins[i])
			}
		}
		for _, item := range sortedKeys(bad) {
			skip(item, "%s", strings.Join(bad[item], "; "))
		}
		c.Filter.Lists = append(c.Filter.Lists[:nFile:nFile], keepLists...)
		c.Filter.Groups = append(c.Filter.Groups[:nFileGroups:nFileGroups], keepGroups...)
		c.Clients = append(c.Clients[:nFileClients:nFileClients], keepClients...)
		origins, clientOrigins, nLayerLists = keepOrigins, keepClientOrigins, len(keepLists)
	}
}

// lastWins is xs with one entry a name: the last of each name, at the
// place of the first.
func lastWins[T any](xs []T, name func(T) string) []T {
	var out []T
	seen := map[string]int{}
	for _, x := range xs {
		if j, dup := seen[name(x)]; dup {
			out[j] = x
			continue
		}
		seen[name(x)] = len(out)
		out = append(out, x)
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// layerMAC reports whether a layer group's device is a MAC address (and
// not an address, a prefix or a name).
func layerMAC(s string) (net.HardwareAddr, bool) {
	if _, err := netip.ParseAddr(s); err == nil {
		return nil, false
	}
	if strings.Count(s, ":")+strings.Count(s, "-") != 5 {
		return nil, false
	}
	return ParseClientMAC(s)
}

// LoadLayer reads the layer of file's filter.state_dir and merges it:
// the effective configuration and what was read and skipped. A layer file
// that cannot be read is reported in LayerState.Err and ignored: file
// alone applies.
func LoadLayer(file Config) (Config, LayerState) {
	st := LayerState{Path: LayerPath(file.Filter.StateDir)}
	if st.Path == "" {
		return file, st
	}
	l, err := ReadLayerFile(st.Path)
	if err != nil {
		st.Err = err.Error()
		return file, st
	}
	st.Layer = l
	eff, skips := l.Apply(file)
	st.Skips = skips
	return eff, st
}
