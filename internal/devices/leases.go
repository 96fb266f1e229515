package devices

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// Lease file formats (docs/devices.md "Names from DHCP leases"): the
// lease files of the DHCP servers a household router runs.
const (
	FormatDnsmasq = "dnsmasq" // dnsmasq.leases
	FormatISC     = "isc"     // ISC dhcpd's dhcpd.leases
	FormatKea     = "kea"     // Kea's memfile CSV (kea-leases4.csv, kea-leases6.csv)
	FormatOdhcpd  = "odhcpd"  // OpenWrt odhcpd's lease file (option leasefile)
)

// Formats lists the lease file formats, for the configuration's check.
var Formats = []string{FormatDnsmasq, FormatISC, FormatKea, FormatOdhcpd}

// Lease is what a lease file says about one device: a name for a MAC, an
// address, or both. MAC is zero where the lease has none (a DHCPv6 lease
// names a DUID, not a MAC).
type Lease struct {
	MAC  MAC
	Addr netip.Addr
	Name string
}

// MaxLeaseName bounds a lease's host name (a DNS name is at most 253
// characters); a longer one, or one with control characters or markup, is
// not a name and is skipped.
const MaxLeaseName = 253

// cleanName is a host name fit to show: trimmed, without the FQDN's final
// dot; "" when it is none ("*" is dnsmasq's, "-" odhcpd's) or does not look
// like a name (an empty label, "a..b" or "a..", included). A name it returns
// is returned unchanged by it again.
func cleanName(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(s), ".")
	if s == "" || s == "*" || s == "-" || len(s) > MaxLeaseName || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return ""
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || unicode.IsSpace(r) || strings.ContainsRune(`<>"'&\`, r)
	}) >= 0 {
		return ""
	}
	return s
}

// ParseLeases reads one lease file in format. A line or block it cannot
// read is skipped (a half-written last line is normal while the DHCP
// server rewrites its file); an error means the file is not of that format
// at all, or not text.
func ParseLeases(format string, b []byte) ([]Lease, error) {
	if bytes.IndexByte(b, 0) >= 0 {
		return nil, errors.New("binary data (a NUL byte): not a lease file")
	}
	switch format {
	case FormatDnsmasq:
		return parseDnsmasq(b), nil
	case FormatISC:
		return parseISC(b), nil
	case FormatKea:
		return parseKea(b)
	case FormatOdhcpd:
		return parseOdhcpd(b), nil
	}
	return nil, fmt.Errorf("unknown lease format %q", format)
}

// parseDnsmasq reads dnsmasq.leases: "EXPIRY MAC IP HOSTNAME CLIENTID" for
// DHCPv4; DHCPv6 leases follow a "duid ..." line as "EXPIRY IAID IP
// HOSTNAME CLIENTID", with no MAC.
func parseDnsmasq(b []byte) []Lease {
	var out []Lease
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] == "duid" {
			continue
		}
		addr, err := netip.ParseAddr(f[2])
		if err != nil {
			continue
		}
		mac, _ := ParseMAC(f[1]) // an IAID for DHCPv6
		l := Lease{MAC: mac, Addr: addr.Unmap(), Name: cleanName(f[3])}
		if l.Name != "" {
			out = append(out, l)
		}
	}
	return out
}

// parseISC reads dhcpd.leases: blocks "lease IP { ... }" with "hardware
// ethernet MAC;" and "client-hostname "NAME";". The file is a log: a later
// block for the same address replaces an earlier one, which the caller's
// index does by keeping the last. A lease no longer active (free, expired,
// released, abandoned) still ties its MAC to its name, not its address.
func parseISC(b []byte) []Lease {
	var out []Lease
	var cur *Lease
	active := true
	s := bufio.NewScanner(bytes.NewReader(b))
	s.Buffer(make([]byte, 4096), 64<<10)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		switch {
		case strings.HasPrefix(line, "lease ") && strings.HasSuffix(line, "{"):
			f := strings.Fields(line)
			cur, active = nil, true
			if a, err := netip.ParseAddr(f[1]); err == nil {
				cur = &Lease{Addr: a.Unmap()}
			}
		case cur == nil:
		case line == "}":
			if !active {
				cur.Addr = netip.Addr{}
			}
			if cur.Name != "" {
				out = append(out, *cur)
			}
			cur = nil
		case strings.HasPrefix(line, "hardware ethernet "):
			cur.MAC, _ = ParseMAC(strings.TrimSuffix(strings.TrimPrefix(line, "hardware ethernet "), ";"))
		case strings.HasPrefix(line, "client-hostname "):
			v := strings.TrimSuffix(strings.TrimPrefix(line, "client-hostname "), ";")
			cur.Name = cleanName(strings.Trim(v, `"`))
		case strings.HasPrefix(line, "binding state "):
			active = strings.TrimSuffix(strings.TrimPrefix(line, "binding state "), ";") == "active"
		}
	}
	return out
}

// parseKea reads Kea's memfile CSV by its header's column names (address,
// hwaddr, hostname, state), so the v4 and v6 files and every Kea version's
// extra columns read alike. Kea writes a comma inside a value as "&#x2c".
// state 0 is a valid lease; a declined (1) or reclaimed (2) one is
// skipped.
func parseKea(b []byte) ([]Lease, error) {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	head, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("kea lease file: no header: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(h)] = i
	}
	ia, okA := col["address"]
	ih, okH := col["hostname"]
	if !okA || !okH {
		return nil, errors.New(`kea lease file: the header has no "address" or "hostname" column`)
	}
	im, okM := col["hwaddr"]
	is, okS := col["state"]
	var out []Lease
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			continue // a half-written line: skip it
		}
		if ia >= len(rec) || ih >= len(rec) || okS && is < len(rec) && rec[is] != "0" && rec[is] != "" {
			continue
		}
		addr, err := netip.ParseAddr(rec[ia])
		if err != nil {
			continue
		}
		l := Lease{Addr: addr.Unmap(), Name: cleanName(strings.ReplaceAll(rec[ih], "&#x2c", ","))}
		if okM && im < len(rec) {
			l.MAC, _ = ParseMAC(rec[im])
		}
		if l.Name != "" {
			out = append(out, l)
		}
	}
}

// parseOdhcpd reads odhcpd's lease file: one line per lease, "# IFACE DUID
// IAID HOSTNAME VALID ASSIGNED PREFIXLEN ADDR/LEN..." — for a DHCPv4 lease
// DUID is the MAC as ether_ntoa(3) writes it ("0:11:22:3:4:5", no leading
// zeros) and IAID is "ipv4". A host name odhcpd found invalid is written
// "broken\x20NAME" and is skipped. Lines without the "#" are the
// hosts-file half ("ADDR NAME") and are read too.
func parseOdhcpd(b []byte) []Lease {
	var out []Lease
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] != "#" {
			if a, err := netip.ParseAddr(f[0]); err == nil {
				if n := cleanName(f[1]); n != "" {
					out = append(out, Lease{Addr: a.Unmap(), Name: n})
				}
			}
			continue
		}
		if len(f) < 9 {
			continue
		}
		name := cleanName(f[4])
		if name == "" {
			continue
		}
		var mac MAC
		if f[3] == "ipv4" {
			mac, _ = parseLooseMAC(f[2])
		}
		for _, p := range f[8:] {
			a, _, _ := strings.Cut(p, "/")
			if addr, err := netip.ParseAddr(a); err == nil {
				out = append(out, Lease{MAC: mac, Addr: addr.Unmap(), Name: name})
			}
		}
	}
	return out
}

// parseLooseMAC reads a MAC as ether_ntoa(3) writes it: six groups of one
// or two hex digits separated by colons.
func parseLooseMAC(s string) (MAC, bool) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return MAC{}, false
	}
	var b [6]byte
	for i, p := range parts {
		if len(p) == 0 || len(p) > 2 {
			return MAC{}, false
		}
		v, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return MAC{}, false
		}
		b[i] = byte(v)
	}
	return macFromBytes(b[:])
}
