package filter

import (
	"time"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/query"
)

// New devices (docs/devices.md "New devices"): a device seen for the first
// time and not yet acknowledged (query.Event.NewDevice) is a member of the
// devices.new_devices group besides whatever its address makes it, so a
// group that blocks everything keeps a stranger's device filtered until
// someone looks. Without new_devices it is filtered like any client (the
// default group).

// withNewDevices makes group (devices.new_devices) the new devices' group;
// "" or a name no group has leaves it unset (the configuration check
// refuses the latter, UnknownGroup).
func (p *Policy) withNewDevices(group string) *Policy {
	if group == "" || group == config.DefaultGroup {
		return p
	}
	for i := range p.groups {
		if p.groups[i].name == group {
			p.newGroup = i
		}
	}
	return p
}

// listsFor is Lists for a query's event, a new device in the new-device
// group.
func (p *Policy) listsFor(ev *query.Event, now time.Time) (uint64, string) {
	return p.resolve(ev.Client, ev.ClientName, ev.NewDevice, now, -1)
}

// groupOfEvent is GroupOf for a query's event.
func (p *Policy) groupOfEvent(ev *query.Event, now time.Time, bit int) string {
	if bit == inlineBit {
		return ""
	}
	_, g := p.resolve(ev.Client, ev.ClientName, ev.NewDevice, now, bit)
	return g
}
