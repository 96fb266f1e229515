package app

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/metrics"
	"github.com/nxdns/nxdns/internal/peers"
	"github.com/nxdns/nxdns/internal/safefile"
	"github.com/nxdns/nxdns/internal/web"
)

// peerState is the replication of the dashboard state with [[peers]]
// (internal/peers, docs/how-to/two-pis.md): the store, opened on the first
// configuration that names a peer and kept for the App's life, and the
// puller of the current peers.
type peerState struct {
	mu    sync.Mutex // guards the fields; Start, Reload and Shutdown under a.mu too
	store *peers.Store
	list  []peers.Peer // the peers the puller runs with, tokens included
	stop  context.CancelFunc
	done  sync.WaitGroup
}

// loadPeers reads the peers' token files; an unreadable one fails a reload.
func loadPeers(ps []config.Peer) ([]peers.Peer, error) {
	var out []peers.Peer
	for _, p := range ps {
		b, err := safefile.ReadFile(p.TokenFile, 4<<10)
		if err != nil {
			return nil, err
		}
		out = append(out, peers.Peer{URL: p.URL, Token: strings.TrimSpace(string(b))})
	}
	return out, nil
}

// applyPeers starts or replaces the puller for cfg's peers.
func (a *App) applyPeers(cfg config.Config, list []peers.Peer) {
	p := &a.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Equal(list, p.list) && (p.stop != nil || len(list) == 0) {
		return
	}
	if p.stop != nil {
		p.stop()
		p.done.Wait()
		p.stop = nil
	}
	p.list = slices.Clone(list)
	if len(list) == 0 {
		return
	}
	if p.store == nil {
		s, err := peers.Open(cfg.Filter.StateDir, a.applyReplicated, a.log)
		if err != nil {
			a.log.Error("peers off: the replicated state could not be opened", zap.Error(err))
			return
		}
		p.store = s
		a.filter.OnChange(s.Local)
		a.devices.OnChange(s.Local)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	s := p.store
	p.done.Go(func() { s.Run(ctx, list) })
}

// applyReplicated applies a peer's change to the part that owns its key:
// the devices' acknowledgements, or the filter's dashboard state (allowed
// names, pauses, group switches, NTAs).
func (a *App) applyReplicated(key, value string) bool {
	if strings.HasPrefix(key, devices.ReplicationPrefix) {
		return a.devices.ApplyReplicated(key, value)
	}
	return a.filter.ApplyReplicated(key, value)
}

func (a *App) stopPeers() {
	p := &a.peers
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		p.stop()
		p.done.Wait()
		p.stop = nil
	}
}

// peerRoutes are GET /api/peers/state (what a peer pulls) and GET
// /api/peers (each peer and whether it is in sync); 404 without peers.
func (a *App) peerRoutes(s *web.Server) {
	route := func(h func(*peers.Store) http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.peers.mu.Lock()
			st := a.peers.store
			a.peers.mu.Unlock()
			if st == nil {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusNotFound)
				w.Write([]byte(`{"error":"no [[peers]] configured"}` + "\n"))
				return
			}
			h(st).ServeHTTP(w, r)
		})
	}
	s.Handle("GET /api/peers/state", route((*peers.Store).Handler), web.Private)
	s.Handle("GET /api/peers", route((*peers.Store).StatusHandler), web.Private)
}

// peerStatus is each peer's last pull, for the dashboard; nil without peers.
func (a *App) peerStatus() []peers.PeerStatus {
	a.peers.mu.Lock()
	st := a.peers.store
	a.peers.mu.Unlock()
	if st == nil {
		return nil
	}
	return st.Status()
}

// peerMetrics are the peers' counts for /metrics.
func (a *App) peerMetrics() []metrics.PeerState {
	var out []metrics.PeerState
	for _, p := range a.peerStatus() {
		out = append(out, metrics.PeerState{URL: p.URL, InSync: p.InSync, Pulls: p.Pulls, Failures: p.Failures, Changes: p.Changes})
	}
	return out
}
