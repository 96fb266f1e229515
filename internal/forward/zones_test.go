package forward

import (
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
)

func TestMatch(t *testing.T) {
	tab := newTestTable(t, time.Second,
		"lan", "udp://127.0.0.1:53",
		"IoT.Lan.", "udp://127.0.0.1:54",
		"168.192.in-addr.arpa", "tcp://127.0.0.1:55",
	)
	tests := []struct {
		name, qname, want string // want "" for no match
	}{
		{"below the zone", "host.lan.", "lan."},
		{"the zone itself", "lan.", "lan."},
		{"longest suffix wins", "cam.iot.lan.", "iot.lan."},
		{"the longer zone itself", "iot.lan.", "iot.lan."},
		{"label boundary, not substring", "notlan.", ""},
		{"label boundary below a zone", "x.notiot.lan.", "lan."},
		{"case-insensitive query", "Host.IoT.LAN.", "iot.lan."},
		{"not fully qualified", "host.lan", "lan."},
		{"escaped dot is inside one label", `a\.lan.`, ""},
		{"other name", "example.com.", ""},
		{"root", ".", ""},
		{"reverse zone", "50.1.168.192.in-addr.arpa.", "168.192.in-addr.arpa."},
		{"sibling reverse", "1.0.0.10.in-addr.arpa.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z, ok := tab.Match(tt.qname)
			got := ""
			if ok {
				got = z.Name()
			}
			if got != tt.want {
				t.Errorf("Match(%q) = %q, want %q", tt.qname, got, tt.want)
			}
		})
	}
}

func TestMatch_RootZoneCoversEverything(t *testing.T) {
	tab := newTestTable(t, time.Second, ".", "udp://127.0.0.1:53", "lan.", "udp://127.0.0.1:54")
	for qname, want := range map[string]string{"example.com.": ".", ".": ".", "a.lan.": "lan."} {
		if z, ok := tab.Match(qname); !ok || z.Name() != want {
			t.Errorf("Match(%q) = %v, want %q", qname, z, want)
		}
	}
}

func TestMatch_NilAndEmptyTablesMatchNothing(t *testing.T) {
	var nilTable *Table
	if _, ok := nilTable.Match("a.lan."); ok {
		t.Error("nil table matched")
	}
	if _, ok := newTestTable(t, time.Second).Match("a.lan."); ok {
		t.Error("empty table matched")
	}
	if nilTable.Snapshot() != nil || nilTable.Zones() != nil {
		t.Error("nil table has zones")
	}
}

func TestMatch_AllocatesNothing(t *testing.T) {
	tab := newTestTable(t, time.Second, "lan", "udp://127.0.0.1:53", "iot.lan", "udp://127.0.0.1:54")
	allocs := testing.AllocsPerRun(100, func() {
		tab.Match("a.b.c.example.lan.")
		tab.Match("www.example.com.")
	})
	if allocs != 0 {
		t.Errorf("Match allocates %v times per call pair, want 0 for lower-case FQDNs", allocs)
	}
}

func TestNewTable_Rejects(t *testing.T) {
	tests := []struct {
		name     string
		zones    []config.ForwardZone
		contains string
	}{
		{"duplicate zone, any case", []config.ForwardZone{
			{Zone: "lan", Resolver: "udp://127.0.0.1:53"}, {Zone: "LAN.", Resolver: "udp://127.0.0.1:54"},
		}, "forward_zones[1].zone"},
		{"empty zone", []config.ForwardZone{{Zone: "", Resolver: "udp://127.0.0.1:53"}}, "forward_zones[0].zone"},
		{"bad zone", []config.ForwardZone{{Zone: "a..b", Resolver: "udp://127.0.0.1:53"}}, "forward_zones[0].zone"},
		{"scheme", []config.ForwardZone{{Zone: "lan", Resolver: "doq://127.0.0.1:853"}}, "scheme"},
		{"host name", []config.ForwardZone{{Zone: "lan", Resolver: "udp://router.lan:53"}}, "IP literal"},
		{"missing port", []config.ForwardZone{{Zone: "lan", Resolver: "udp://127.0.0.1"}}, "port"},
		{"port zero", []config.ForwardZone{{Zone: "lan", Resolver: "udp://127.0.0.1:0"}}, "port"},
		{"path", []config.ForwardZone{{Zone: "lan", Resolver: "udp://127.0.0.1:53/x"}}, "only scheme"},
		{"userinfo", []config.ForwardZone{{Zone: "lan", Resolver: "udp://u@127.0.0.1:53"}}, "only scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTable(tt.zones, time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("err = %v, want one mentioning %q", err, tt.contains)
			}
		})
	}
	if _, err := NewTable(nil, 0); err == nil {
		t.Error("zero read timeout accepted")
	}
}

func TestNewTable_CanonicalResolverURL(t *testing.T) {
	tab := newTestTable(t, time.Second, "lan", "udp://[::ffff:127.0.0.1]:53", "v6", "tcp://[::1]:5353")
	got := []string{}
	for _, s := range tab.Snapshot() {
		got = append(got, s.Zone+" "+s.Resolver)
	}
	want := "lan. udp://127.0.0.1:53,v6. tcp://[::1]:5353"
	if strings.Join(got, ",") != want {
		t.Errorf("snapshot %q, want %q", got, want)
	}
}

func BenchmarkMatch(b *testing.B) {
	tab, err := NewTable([]config.ForwardZone{
		{Zone: "lan", Resolver: "udp://127.0.0.1:53"},
		{Zone: "iot.lan", Resolver: "udp://127.0.0.1:54"},
		{Zone: "168.192.in-addr.arpa", Resolver: "udp://127.0.0.1:53"},
	}, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		tab.Match("cam.iot.lan.")
		tab.Match("www.example.com.")
	}
}
