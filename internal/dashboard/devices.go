package dashboard

import (
	"net/http"

	"github.com/nxdns/nxdns/internal/devices"
)

// pageDevices lists the devices seen (docs/devices.md), new ones first,
// each new one with a button that acknowledges it (POST /api/devices/ack).
func (d *Dashboard) pageDevices(w http.ResponseWriter, r *http.Request) {
	var list []devices.Device
	if d.deps.Devices != nil {
		list = d.deps.Devices()
	}
	var fresh, known []devices.Device
	for _, dev := range list {
		if dev.New {
			fresh = append(fresh, dev)
		} else {
			known = append(known, dev)
		}
	}
	d.render(w, r, "devices", "Devices", http.StatusOK, map[string]any{
		"New": fresh, "Known": known, "Any": len(list) > 0, "LayerGroups": d.layerGroups(),
	})
}

// newDevices is how many devices are new and not yet acknowledged, for the
// clients page's note.
func (d *Dashboard) newDevices() int {
	if d.deps.Devices == nil {
		return 0
	}
	n := 0
	for _, dev := range d.deps.Devices() {
		if dev.New {
			n++
		}
	}
	return n
}
