package devices

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/nxdns/nxdns/internal/safefile"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func leaseStrings(ls []Lease) []string {
	var out []string
	for _, l := range ls {
		a := ""
		if l.Addr.IsValid() {
			a = l.Addr.String()
		}
		out = append(out, l.MAC.String()+" "+a+" "+l.Name)
	}
	return out
}

// TestParseLeases_fixtures: each format's fixture, written as its DHCP
// server writes it, gives the names it holds; "no name" markers, markup,
// invalid names and half-written last lines are skipped.
func TestParseLeases_fixtures(t *testing.T) {
	for _, c := range []struct {
		format, file string
		want         []string
	}{
		{FormatDnsmasq, "dnsmasq.leases", []string{
			"02:00:5e:10:00:02 192.168.1.20 kids-tablet",
			"02:00:5e:10:00:04 192.168.1.22 dad-laptop",
			" fd00:1::20 kids-tablet", // DHCPv6: an IAID, no MAC
		}},
		{FormatISC, "dhcpd.leases", []string{
			"02:00:5e:10:00:10 192.168.1.30 living-room-tv",
			"02:00:5e:10:00:11  old-phone", // binding state free: the MAC's name, not the address's
			"02:00:5e:10:00:10 192.168.1.30 tv",
		}},
		{FormatKea, "kea-leases4.csv", []string{
			"02:00:5e:10:00:20 192.168.1.40 kitchen-speaker",
			"02:00:5e:10:00:21 192.168.1.41 printer.home.arpa",
		}},
		{FormatKea, "kea-leases6.csv", []string{
			"02:00:5e:10:00:20 fd00:1::40 kitchen-speaker",
			" fd00:1::41 study-pc",
		}},
		{FormatOdhcpd, "odhcpd.leases", []string{
			" fd00:1::40 study-pc",
			" fd00:1:0:1::40 study-pc",
			"00:00:5e:10:00:42 192.168.1.50 garden-cam",
		}},
	} {
		got, err := ParseLeases(c.format, readFixture(t, c.file))
		if err != nil {
			t.Errorf("%s: %v", c.file, err)
			continue
		}
		if s := leaseStrings(got); !slices.Equal(s, c.want) {
			t.Errorf("%s:\n got %q\nwant %q", c.file, s, c.want)
		}
	}
}

// TestParseLeases_badInput: binary data and a Kea file without its header
// are errors that name the problem; nothing panics.
func TestParseLeases_badInput(t *testing.T) {
	if _, err := ParseLeases(FormatDnsmasq, []byte("1 02:00:5e:00:00:01 10.0.0.1 a\x00b")); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("binary data: err = %v, want one that says binary", err)
	}
	if _, err := ParseLeases(FormatKea, []byte("192.168.1.1,aa\n")); err == nil || !strings.Contains(err.Error(), "header") {
		t.Errorf("kea without header: err = %v, want one about the header", err)
	}
	if _, err := ParseLeases("windows", nil); err == nil {
		t.Error("an unknown format parsed")
	}
}

// TestLeases_fileRulesKeepLastGood: a lease file is read with safefile's
// rules: replaced by a FIFO or grown past the cap, it is refused with a
// clear error and the names last read stay; a rewritten file is read
// again.
func TestLeases_fileRulesKeepLastGood(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "dnsmasq.leases")
	if err := os.WriteFile(path, readFixture(t, "dnsmasq.leases"), 0o600); err != nil {
		t.Fatal(err)
	}
	l := NewLeases([]LeaseFile{{Format: FormatDnsmasq, Path: path}}, nil, false)
	defer l.Close()
	tablet, _ := ParseMAC("02:00:5e:10:00:02")
	if got := l.ByMAC(tablet); got != "kids-tablet" {
		t.Fatalf("ByMAC = %q, want kids-tablet", got)
	}
	if got := l.ByAddr(netip.MustParseAddr("192.168.1.22")); got != "dad-laptop" {
		t.Fatalf("ByAddr = %q, want dad-laptop", got)
	}

	// A FIFO in its place: refused at once (never blocks), names kept.
	os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readLeases(LeaseFile{Format: FormatDnsmasq, Path: path}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: err = %v, want not a regular file", err)
	}
	l.Refresh()
	if got := l.ByMAC(tablet); got != "kids-tablet" {
		t.Errorf("after a FIFO: ByMAC = %q, want the last good kids-tablet", got)
	}

	// Huge: refused by size, names kept.
	os.Remove(path)
	if err := os.WriteFile(path, make([]byte, MaxLeaseFileBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readLeases(LeaseFile{Format: FormatDnsmasq, Path: path}); !errors.Is(err, safefile.ErrTooLarge) {
		t.Errorf("huge: err = %v, want ErrTooLarge", err)
	}
	l.Refresh()
	if got := l.ByMAC(tablet); got != "kids-tablet" {
		t.Errorf("after a huge file: ByMAC = %q, want the last good kids-tablet", got)
	}

	// Rewritten by the DHCP server: the new name.
	if err := os.WriteFile(path, []byte("1 02:00:5e:10:00:02 192.168.1.20 tablet-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.Refresh()
	if got := l.ByMAC(tablet); got != "tablet-2" {
		t.Errorf("after a rewrite: ByMAC = %q, want tablet-2", got)
	}
}

// FuzzParseLeases: no lease file, however damaged, panics a parser, and
// every name a parser returns is one cleanName accepts.
func FuzzParseLeases(f *testing.F) {
	for _, name := range []string{"dnsmasq.leases", "dhcpd.leases", "kea-leases4.csv", "kea-leases6.csv", "odhcpd.leases"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("lease {\nlease  {\n}\nlease 1.2.3.4 {\nclient-hostname \"\";\n}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, format := range Formats {
			leases, _ := ParseLeases(format, b)
			for _, l := range leases {
				if l.Name == "" || cleanName(l.Name) != l.Name {
					t.Fatalf("%s: name %q", format, l.Name)
				}
			}
		}
	})
}
