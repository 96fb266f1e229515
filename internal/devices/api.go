package devices

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The devices API (docs/reference/openapi.json): the list the dashboard's
// devices page shows, and the acknowledgement of a new device. internal/app
// mounts them, the list Private, the acknowledgement Mutating.

// ListAnswer is what GET /api/devices answers.
type ListAnswer struct {
	Devices []Device `json:"devices"`
	New     int      `json:"new"` // of them, new and not acknowledged
}

// AckAnswer is what POST /api/devices/ack answers.
type AckAnswer struct {
	Key          string `json:"key"`
	Acknowledged bool   `json:"acknowledged"`
}

// ListHandler answers the devices remembered, most recently seen first.
func (r *Registry) ListHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		a := ListAnswer{Devices: r.List()}
		for _, d := range a.Devices {
			if d.New {
				a.New++
			}
		}
		writeJSON(w, http.StatusOK, a)
	})
}

// AckHandler acknowledges the device the client parameter names: its key
// (mac:… or id:…, as the list gives it) or its MAC. A device not
// remembered is 404; a missing or malformed parameter is 400.
func (r *Registry) AckHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		client := req.FormValue("client")
		key, ok := ackKey(client)
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "client: want a device key (mac:aa:bb:cc:dd:ee:ff or id:NAME) or a MAC address"})
			return
		}
		if !r.Ack(key) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no device " + key + " has been seen"})
			return
		}
		writeJSON(w, http.StatusOK, AckAnswer{Key: key, Acknowledged: true})
	})
}

// ackKey is the registry key client names, normalised.
func ackKey(client string) (string, bool) {
	if m, ok := ParseMAC(client); ok {
		return "mac:" + m.String(), true
	}
	k, ok := parseDevKey(strings.TrimSpace(client))
	if !ok {
		return "", false
	}
	return k.String(), true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
