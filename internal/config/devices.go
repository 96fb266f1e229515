package config

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
)

// Devices is [devices]: how nxdns knows the LAN's devices (docs/devices.md).
type Devices struct {
	// Neighbours reads the kernel's neighbour table (ARP and NDP) for the
	// clients' MAC addresses; nil means true.
	Neighbours *bool `toml:"neighbours"`
	// Leases are DHCP lease files whose host names name devices.
	Leases []LeaseFile `toml:"leases"`
	// NewDevices is the group a device seen for the first time is filtered
	// by until it is acknowledged on the dashboard; "" means the default
	// group, as for any client.
	NewDevices string `toml:"new_devices"`
}

// LeaseFile is one element of [[devices.leases]].
type LeaseFile struct {
	Format string `toml:"format"` // dnsmasq, isc, kea, odhcpd
	Path   string `toml:"path"`   // absolute
}

// LeaseFormats are devices.leases[].format's values (internal/devices).
var LeaseFormats = []string{"dnsmasq", "isc", "kea", "odhcpd"}

// ReadsNeighbours reports whether the neighbour table is read.
func (d Devices) ReadsNeighbours() bool { return d.Neighbours == nil || *d.Neighbours }

// Problem codes of the device keys (docs/reference/configuration.md).
const (
	CodeInvalidMAC      Code = "InvalidMAC"      // clients[].mac that is not one unicast EUI-48 address
	CodeInvalidClientID Code = "InvalidClientID" // clients[].client_id that is not one DNS label
	CodeNameCollision   Code = "NameCollision"   // a [[clients]] name equal to a filter group's name
	CodeUnknownGroup    Code = "UnknownGroup"    // devices.new_devices naming no filter group
)

// maxClientID is a ClientID's longest form: one DNS label, so that it fits
// a DoT SNI label as well as a DoH path (docs/devices.md "ClientID").
const maxClientID = 63

// validClientID reports whether id is one DNS label of letters, digits and
// hyphens, as internal/devices.ValidClientID checks a presented one.
func validClientID(id string) bool {
	if id == "" || len(id) > maxClientID || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	return strings.IndexFunc(id, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-')
	}) < 0
}

// ParseClientMAC reads clients[].mac: an EUI-48 address in any of the
// forms net.ParseMAC takes; ok is false for another length, the zero
// address or a group address.
func ParseClientMAC(s string) (net.HardwareAddr, bool) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 || hw[0]&1 != 0 || string(hw) == "\x00\x00\x00\x00\x00\x00" {
		return nil, false
	}
	return hw, true
}

// checkDevices checks [devices], dns.trusted_forwarders and the device
// keys of [[clients]].
func checkDevices(ps *Problems, c Config) {
	groups := map[string]bool{}
	for _, g := range c.Filter.Groups {
		groups[g.Name] = true
	}
	macs, ids := map[string]int{}, map[string]int{}
	for i, cl := range c.Clients {
		path := fmt.Sprintf("clients[%d]", i)
		if cl.MAC != "" {
			if hw, ok := ParseClientMAC(cl.MAC); !ok {
				ps.add(path+".mac", CodeInvalidMAC, "%q: want one unicast MAC address, e.g. aa:bb:cc:dd:ee:ff", cl.MAC)
			} else if j, dup := macs[hw.String()]; dup {
				ps.add(path+".mac", CodeDuplicate, "%s is already clients[%d].mac", hw, j)
			} else {
				macs[hw.String()] = i
			}
		}
		if cl.ClientID != "" {
			id := strings.ToLower(cl.ClientID)
			if !validClientID(cl.ClientID) {
				ps.add(path+".client_id", CodeInvalidClientID, "%.80q: want one DNS label: 1 to %d letters, digits or hyphens, not starting or ending with a hyphen", cl.ClientID, maxClientID)
			} else if j, dup := ids[id]; dup {
				ps.add(path+".client_id", CodeDuplicate, "%q is already clients[%d].client_id", cl.ClientID, j)
			} else {
				ids[id] = i
			}
		}
		if groups[cl.Name] && cl.Name != "" {
			ps.add(path+".name", CodeNameCollision, "%q is also a filter group's name: a device and a group must not share a name (the dashboard and the API name both)", cl.Name)
		}
	}
	for i, f := range c.DNS.TrustedForwarders {
		if _, err := netip.ParsePrefix(f); err == nil {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil && a.Zone() == "" {
			continue
		}
		ps.add(fmt.Sprintf("dns.trusted_forwarders[%d]", i), CodeInvalidCIDR, "%q is not an IP address or CIDR prefix", f)
	}
	for i, l := range c.Devices.Leases {
		path := fmt.Sprintf("devices.leases[%d]", i)
		if !contains(LeaseFormats, l.Format) {
			ps.add(path+".format", CodeInvalidChoice, "%q: want one of %s", l.Format, strings.Join(LeaseFormats, ", "))
		}
		switch {
		case l.Path == "":
			ps.add(path+".path", CodeRequired, "missing: a lease file is a format and a path")
		case !filepath.IsAbs(l.Path):
			ps.add(path+".path", CodeInvalidPath, "%q: want an absolute path, e.g. /var/lib/misc/dnsmasq.leases", l.Path)
		}
	}
	if g := c.Devices.NewDevices; g != "" && !groups[g] && g != DefaultGroup {
		ps.add("devices.new_devices", CodeUnknownGroup, "%q is not a filter.groups name", g)
	}
}

// TrustedForwarderPrefixes is dns.trusted_forwarders as prefixes (an address is
// its /32 or /128; IPv4-mapped addresses unmapped). Invalid entries, which
// Validate reports, are skipped.
func (d DNS) TrustedForwarderPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, f := range d.TrustedForwarders {
		if p, ok := parseAddrOrPrefix(f); ok {
			out = append(out, p)
		}
	}
	return out
}
