package fakeup

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
)

// counters is one listener's tally. The server-wide totals are sums taken at
// snapshot time, so each event is counted once.
type counters struct {
	queries     atomic.Uint64 // DNS messages received, well-formed or not
	connections atomic.Uint64 // TCP connections accepted (tcp, dot, doh)
	handshakes  atomic.Uint64 // TLS handshakes completed (dot, doh)
	resumed     atomic.Uint64 // of those, handshakes that resumed a session
	requests    atomic.Uint64 // DoH requests received, any method or path
	h2requests  atomic.Uint64 // of those, over HTTP/2
	answered    atomic.Uint64 // replies written in full
	stalled     atomic.Uint64 // queries held unanswered by stall=1
}

// Counts is a point-in-time copy of counters, in the JSON shape the
// scenario tests read.
type Counts struct {
	Queries     uint64 `json:"queries"`
	Connections uint64 `json:"connections"`
	Handshakes  uint64 `json:"handshakes"`
	Resumed     uint64 `json:"resumed"`
	Requests    uint64 `json:"requests"`
	H2Requests  uint64 `json:"h2_requests"`
	Answered    uint64 `json:"answered"`
	Stalled     uint64 `json:"stalled"`
}

// Snapshot is the whole server's counts: totals, and per listener keyed by
// the listen URL without its query ("dot://127.0.0.1:8853").
type Snapshot struct {
	Counts
	PerListener map[string]Counts `json:"per_listener"`
}

func (c *counters) load() Counts {
	return Counts{
		Queries:     c.queries.Load(),
		Connections: c.connections.Load(),
		Handshakes:  c.handshakes.Load(),
		Resumed:     c.resumed.Load(),
		Requests:    c.requests.Load(),
		H2Requests:  c.h2requests.Load(),
		Answered:    c.answered.Load(),
		Stalled:     c.stalled.Load(),
	}
}

func (c *Counts) add(o Counts) {
	c.Queries += o.Queries
	c.Connections += o.Connections
	c.Handshakes += o.Handshakes
	c.Resumed += o.Resumed
	c.Requests += o.Requests
	c.H2Requests += o.H2Requests
	c.Answered += o.Answered
	c.Stalled += o.Stalled
}

// Counters returns a snapshot of every listener's counts and their totals.
func (s *Server) Counters() Snapshot {
	snap := Snapshot{PerListener: make(map[string]Counts, len(s.listeners))}
	for _, l := range s.listeners {
		c := l.counters.load()
		snap.PerListener[l.key] = c
		snap.Counts.add(c)
	}
	return snap
}

// Handler serves GET /counters (the Snapshot as JSON) and GET /healthz
// ("ok"), for the -http flag or a test that mounts it elsewhere.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /counters", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(s.Counters()) // a write error means the client left
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok"))
	})
	return mux
}
