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
		"New": fresh, "Known": known, "Any": len(list) > 0,
	})
}
