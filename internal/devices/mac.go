// Package devices knows the LAN's devices (docs/devices.md): a device is
// its MAC address where the LAN shows one — read from the kernel's
// neighbour table (IPv4 ARP and IPv6 NDP together, followed over rtnetlink),
// or from a trusted forwarder's EDNS0 option 65001 — or the ClientID a DoT
// or DoH client presents, else its address. Names come from the
// configuration ([[clients]] by mac, client_id or ip), DHCP lease files
// (dnsmasq, ISC dhcpd, Kea CSV, odhcpd) and the PTR names the forward zones
// teach (internal/forward). A device seen for the first time is new until
// someone acknowledges it on the dashboard.
package devices

import (
	"encoding/hex"
	"net/netip"
	"strings"

	"github.com/nxdns/nxdns/internal/query"
)

// MAC is an EUI-48 hardware address. The zero MAC means "none".
type MAC [6]byte

// IsZero reports whether m is the zero MAC (none known).
func (m MAC) IsZero() bool { return m == MAC{} }

// String is m as the query log, the API and the configuration write it:
// lower-case hex pairs separated by colons; "" for the zero MAC.
func (m MAC) String() string {
	if m.IsZero() {
		return ""
	}
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, c := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, digits[c>>4], digits[c&0xf])
	}
	return string(b)
}

// ParseMAC reads "aa:bb:cc:dd:ee:ff", "aa-bb-cc-dd-ee-ff" or
// "aabbccddeeff" (any case), the forms lease files and people write. The
// zero MAC and a group (multicast) address are no device and are refused.
func ParseMAC(s string) (MAC, bool) {
	var m MAC
	switch len(s) {
	case 17:
		sep := s[2]
		if sep != ':' && sep != '-' {
			return MAC{}, false
		}
		for i := range 6 {
			if i > 0 && s[3*i-1] != sep {
				return MAC{}, false
			}
			if _, err := hex.Decode(m[i:i+1], []byte(s[3*i:3*i+2])); err != nil {
				return MAC{}, false
			}
		}
	case 12:
		if _, err := hex.Decode(m[:], []byte(s)); err != nil {
			return MAC{}, false
		}
	default:
		return MAC{}, false
	}
	if m.IsZero() || m[0]&1 != 0 {
		return MAC{}, false
	}
	return m, true
}

// macFromBytes is a 6-byte link-layer address as a MAC; ok is false for
// any other length or an address that names no device.
func macFromBytes(b []byte) (MAC, bool) {
	var m MAC
	if len(b) != len(m) {
		return MAC{}, false
	}
	copy(m[:], b)
	if m.IsZero() || m[0]&1 != 0 {
		return MAC{}, false
	}
	return m, true
}

// Key is the one name of a device that per-device state is kept under (the
// new-device list, and the rate limiter's buckets: docs/devices.md
// "Device keys"): "mac:aa:bb:cc:dd:ee:ff" when its MAC is known, else
// "ip:ADDR" for an IPv4 client, else "ip:PREFIX/64" for an IPv6 one — a
// host picks any address of its /64 at will (query.ClientShareKey), so
// counting its addresses one by one would be no bound. mac is the query's
// Event.ClientMAC ("" when none is known). It allocates one string.
func Key(client netip.Addr, mac string) string {
	if mac != "" {
		return "mac:" + mac
	}
	p := query.ClientShareKey(client)
	if p.Bits() == 32 {
		return "ip:" + p.Addr().String()
	}
	return "ip:" + p.String()
}

// IDKey is the key of a device known by its ClientID (docs/devices.md
// "ClientID").
func IDKey(id string) string { return "id:" + strings.ToLower(id) }
