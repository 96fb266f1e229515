package web

import (
	"strings"
	"testing"

	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/server"
)

// TestWithZones: a dead forward-zone resolver degrades the status and says
// which, and never masks or lowers a worse status (issue 16, finding 18).
func TestWithZones(t *testing.T) {
	zones := []forward.ZoneSnapshot{
		{Zone: "lan.", Resolver: "udp://192.168.1.1:53", Down: true},
		{Zone: "168.192.in-addr.arpa.", Resolver: "udp://192.168.1.1:53"},
	}
	for _, c := range []struct {
		name  string
		base  Health
		zones []forward.ZoneSnapshot
		want  Status
		down  int
	}{
		{"no zones", HealthFrom(poolOf(false), server.Snapshot{}, 1), nil, StatusOK, 0},
		{"all up", HealthFrom(poolOf(false), server.Snapshot{}, 1), zones[1:], StatusOK, 0},
		{"one down", HealthFrom(poolOf(false), server.Snapshot{}, 1), zones, StatusDegraded, 1},
		{"one down, pool dead", HealthFrom(poolOf(true), server.Snapshot{}, 1), zones, StatusError, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.base.WithZones(c.zones)
			if h.Status != c.want || h.Zones == nil || h.Zones.Down != c.down || h.Zones.Configured != len(c.zones) {
				t.Fatalf("status %q zones %+v; want %q with %d of %d down", h.Status, h.Zones, c.want, c.down, len(c.zones))
			}
			named := strings.Contains(strings.Join(h.Problems, "\n"), "lan. udp://192.168.1.1:53")
			if named != (c.down > 0) {
				t.Errorf("problems %q: the dead zone named = %v, want %v", h.Problems, named, c.down > 0)
			}
		})
	}
}
