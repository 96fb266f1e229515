package app

import (
	"net"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/testutil"
	"github.com/nxdns/nxdns/internal/web"
)

// TestHealth_deadZoneResolverDegrades: a forward zone whose resolver never
// answers shows in /api/health's view as a down zone and a degraded status,
// from the background probe alone, without any client query (finding 18).
func TestHealth_deadZoneResolverDegrades(t *testing.T) {
	r := newRig(t)
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	cfg := r.config(t, loopbackAddr(t), false)
	cfg.ForwardZones = []config.ForwardZone{{Zone: "lan", Resolver: "udp://" + silent.LocalAddr().String()}}
	a := r.start(t, cfg)
	testutil.WaitFor(t, "the zone resolver reported down", 5*time.Second, func() bool {
		h := a.health()
		return h.Zones != nil && h.Zones.Down == 1
	})
	if h := a.health(); h.Status != web.StatusDegraded {
		t.Errorf("status %q with a dead zone resolver, want degraded", h.Status)
	}
	if n := r.observed.FilterMessage("forward-zone resolver unreachable").Len(); n != 1 {
		t.Errorf("%d unreachable lines, want 1", n)
	}
}
