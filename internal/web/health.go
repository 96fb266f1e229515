package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/upstream"
)

// Status is the overall verdict of /api/health.
type Status string

const (
	// StatusOK: every listener is up and no enabled upstream is in backoff.
	StatusOK Status = "ok"
	// StatusDegraded: some, not all, enabled upstreams are in backoff.
	// Queries are still answered by the others, so HTTP 200.
	StatusDegraded Status = "degraded"
	// StatusError: no listener is up, or every enabled upstream is in
	// backoff (queries reach them only as a last resort), or the pool has
	// none. Clients are likely getting SERVFAIL, so HTTP 503.
	StatusError Status = "error"
)

// Health is the body of /api/health. It reflects state; it never drives a
// restart (docs/design.md#health).
type Health struct {
	Status    Status          `json:"status"`
	Problems  []string        `json:"problems,omitempty"` // why the status is not ok, in words
	Listeners ListenersHealth `json:"listeners"`
	Upstreams UpstreamsHealth `json:"upstreams"`
	Zones     *ZonesHealth    `json:"zones,omitempty"` // set by WithZones
	Clock     ClockHealth     `json:"clock"`
	History   *HistoryHealth  `json:"history,omitempty"` // nil when the binary runs without a history
	Lists     *ListsHealth    `json:"lists,omitempty"`   // nil without filter lists
	// Certificate is the DoT/DoH serving certificate, when nxdns serves TLS
	// (certhealth.go).
	Certificate *CertificateHealth `json:"certificate,omitempty"`
	DNSSEC      *DNSSECHealth      `json:"dnssec,omitempty"` // set by WithDNSSEC
}

// ClockHealth is the system clock, which certificate checks depend on
// (internal/clock).
type ClockHealth struct {
	State  clock.State `json:"state"`  // synchronized, unsynchronized or unknown
	Source string      `json:"source"` // timesyncd or kernel; "" when unknown
}

// HistoryHealth is the query history's condition (docs/design.md#health): degraded when
// its store could not be opened or written. It never makes the status
// error: DNS is not affected.
type HistoryHealth struct {
	Status  Status `json:"status"`            // ok or degraded
	Store   string `json:"store"`             // "file" or "memory"
	Problem string `json:"problem,omitempty"` // why it is degraded
}

// WithHistory adds the history's condition to h: a problem makes an ok
// status degraded and is listed with the others.
func (h Health) WithHistory(store, problem string) Health {
	hh := &HistoryHealth{Status: StatusOK, Store: store}
	if problem != "" {
		hh.Status, hh.Problem = StatusDegraded, problem
		h.Problems = append(h.Problems, "history: "+problem)
		if h.Status == StatusOK {
			h.Status = StatusDegraded
		}
	}
	h.History = hh
	return h
}

// ListenersHealth is the DNS side.
type ListenersHealth struct {
	Up             int   `json:"up"`              // addresses with their UDP and TCP sockets bound
	UDPInFlight    int64 `json:"udp_in_flight"`   // UDP queries being answered now
	TCPConnections int64 `json:"tcp_connections"` // TCP connections open now
}

// UpstreamsHealth is the pool.
type UpstreamsHealth struct {
	Enabled   int      `json:"enabled"`           // entries of the serving pool
	InBackoff int      `json:"in_backoff"`        // of those, in backoff now
	Backoff   []string `json:"backoff,omitempty"` // their redacted URLs, in priority order
}

// HTTPStatus is the response code for h: 503 for StatusError, so a monitor
// that only reads codes sees it; 200 otherwise, degraded included, because
// nxdns still answers queries then.
func (h Health) HTTPStatus() int {
	if h.Status == StatusError {
		return http.StatusServiceUnavailable
	}
	return http.StatusOK
}

// HealthFrom computes the health from the serving pool's and server's
// snapshots and the number of listen addresses bound (server.Addrs). It is
// pure: the composition root calls it from the health function it gives New.
func HealthFrom(pool upstream.Snapshot, srv server.Snapshot, listenersUp int) Health {
	h := Health{
		Listeners: ListenersHealth{Up: listenersUp, UDPInFlight: srv.UDPInFlight, TCPConnections: srv.TCPConns},
		Upstreams: UpstreamsHealth{Enabled: len(pool.Upstreams)},
	}
	for _, u := range pool.Upstreams {
		if u.InBackoff {
			h.Upstreams.InBackoff++
			h.Upstreams.Backoff = append(h.Upstreams.Backoff, upstream.RedactString(u.URL))
		}
	}
	up := h.Upstreams
	if listenersUp <= 0 {
		h.Problems = append(h.Problems, "no DNS listener is up")
	}
	switch {
	case up.Enabled == 0:
		h.Problems = append(h.Problems, "no upstream is enabled")
	case up.InBackoff == up.Enabled:
		h.Problems = append(h.Problems, fmt.Sprintf("every upstream (%d) is in backoff", up.Enabled))
	case up.InBackoff > 0:
		h.Problems = append(h.Problems, fmt.Sprintf("%d of %d upstreams in backoff", up.InBackoff, up.Enabled))
	}
	switch {
	case listenersUp <= 0 || up.Enabled == 0 || up.InBackoff == up.Enabled:
		h.Status = StatusError
	case up.InBackoff > 0:
		h.Status = StatusDegraded
	default:
		h.Status = StatusOK
	}
	return h
}

// WithClock adds the clock's state. An unsynchronized clock is named as a
// problem when upstreams are in backoff — their certificates were likely
// refused as not yet valid — and changes no status: with every upstream
// answering, the clock is evidently good enough for them.
func (h Health) WithClock(r clock.Reading) Health {
	h.Clock = ClockHealth{State: r.State, Source: r.Source}
	if r.State == clock.Unsynchronized && h.Upstreams.InBackoff > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf(
			"the system clock is not synchronized (%s): upstream certificates may be refused as not yet valid until NTP sets it", r.Source))
	}
	return h
}

// healthHandler answers GET /api/health with health() as JSON.
func healthHandler(health func() Health, log *zap.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := health()
		body, err := json.Marshal(h)
		if err != nil { // unreachable for these types; answer rather than panic
			log.Error("health: encode", zap.Error(err))
			http.Error(w, "health: encode failed", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store") // a status must never be served from a cache
		w.WriteHeader(h.HTTPStatus())
		w.Write(append(body, '\n'))
	})
}

// ZonesHealth is the forward zones' resolvers (docs/design.md#pool-health, docs/design.md#health).
type ZonesHealth struct {
	Configured int      `json:"configured"`           // forward zones of the running configuration
	Down       int      `json:"down"`                 // of those, whose resolver is unreachable now
	DownZones  []string `json:"down_zones,omitempty"` // "lan. udp://192.168.1.1:53", in configuration order
}

// WithZones adds the forward zones' condition to h. A zone whose resolver
// is down makes the status degraded, never error: its names fail, every
// other name is still answered. It is a step of its own, beside HealthFrom,
// so conditions can be added without changing that function's signature.
func (h Health) WithZones(zones []forward.ZoneSnapshot) Health {
	h.Zones = &ZonesHealth{Configured: len(zones)}
	for _, z := range zones {
		if z.Down {
			h.Zones.Down++
			h.Zones.DownZones = append(h.Zones.DownZones, z.Zone+" "+z.Resolver)
		}
	}
	if h.Zones.Down == 0 {
		return h
	}
	h.Problems = append(h.Problems, fmt.Sprintf("%d of %d forward-zone resolvers unreachable: %s",
		h.Zones.Down, h.Zones.Configured, strings.Join(h.Zones.DownZones, ", ")))
	if h.Status == StatusOK {
		h.Status = StatusDegraded
	}
	return h
}
