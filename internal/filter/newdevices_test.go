package filter

import (
	"net/netip"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// TestPolicy_newDeviceInNewDevicesGroup: a new, unacknowledged device gets
// the new_devices group's lists (and the group is named for it); once
// acknowledged, the same client gets only what its address gives it.
func TestPolicy_newDeviceInNewDevicesGroup(t *testing.T) {
	cfg := config.Filter{Groups: []config.FilterGroup{
		{Name: "quarantine", Lists: []string{"everything"}},
		{Name: config.DefaultGroup, Lists: []string{"ads"}},
	}}
	bits := map[string]int{"ads": 0, "everything": 1}
	p := NewPolicy(cfg, nil, bits, time.UTC).withNewDevices("quarantine")
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ev := &query.Event{Client: netip.MustParseAddr("192.168.1.77"), ClientMAC: "02:00:5e:00:00:01", NewDevice: true}
	mask, group := p.listsFor(ev, now)
	if mask&(1<<1) == 0 || group != "quarantine" {
		t.Errorf("new device: mask %b group %q, want the everything list and group quarantine", mask, group)
	}
	ev.NewDevice = false
	mask, group = p.listsFor(ev, now)
	if mask&(1<<1) != 0 || mask&1 == 0 || group != config.DefaultGroup {
		t.Errorf("acknowledged device: mask %b group %q, want only default's ads", mask, group)
	}
}

// TestPolicy_newDeviceUsesNewDevicesGroupsPool: a new, unacknowledged
// device is a member of the new_devices group for its upstreams too
// (docs/devices.md "New devices", docs/filter.md "Per-group upstreams"):
// a quarantine group with a filtering resolver of its own must send the
// stranger's queries there, not to the main pool, as its lists apply.
func TestPolicy_newDeviceUsesNewDevicesGroupsPool(t *testing.T) {
	cfg := config.Filter{Groups: []config.FilterGroup{
		{Name: "quarantine", Lists: []string{"everything"}, Upstreams: []string{"tls://family.test"}},
		{Name: config.DefaultGroup, Lists: []string{"ads"}},
	}}
	bits := map[string]int{"ads": 0, "everything": 1}
	s := &Stage{policy: NewPolicy(cfg, nil, bits, time.UTC).withNewDevices("quarantine"), e: &Engine{}}
	ev := &query.Event{Time: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC),
		Client: netip.MustParseAddr("192.168.1.77"), ClientMAC: "02:00:5e:00:00:01", NewDevice: true}
	if pool := s.PoolOf(ev); pool != "quarantine" {
		t.Errorf("new device: pool %q, want quarantine's own", pool)
	}
	ev.NewDevice = false
	if pool := s.PoolOf(ev); pool != "" {
		t.Errorf("acknowledged device: pool %q, want the main pool", pool)
	}
}
