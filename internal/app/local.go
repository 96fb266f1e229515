package app

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/localnet"
)

// dns.allow's "local" (docs/design.md#config-allow): the host's own networks, followed while
// nxdns runs. The watcher outlives generations (a reload that keeps "local"
// keeps following); a change swaps in a server state with the new allow set
// and the same generation, so no pool or zone is rebuilt for it.

// followLocal starts the watcher when cfg uses "local" and none runs yet.
// It is called with a.mu held, or before the App is shared.
func (a *App) followLocal(cfg config.Config) error {
	if !cfg.DNS.AllowsLocal() || a.local != nil {
		return nil
	}
	w, err := localnet.Watch(a.localChanged, a.log.Named("localnet"))
	if err != nil {
		return fmt.Errorf(`dns.allow "local": %w`, err)
	}
	a.local = w
	return nil
}

// localPrefixes is the current set, or nil when nothing follows it.
func (a *App) localPrefixes() []netip.Prefix {
	if a.local == nil {
		return nil
	}
	return a.local.Prefixes()
}

// localChanged is the watcher's onChange: the running generation gets a
// server state with the new networks. The state it replaces may still carry
// queries using the generation's pool, so its drain is kept for the reload
// that retires the generation (Reload waits for every one).
func (a *App) localChanged(ps []netip.Prefix) {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.gen.Load()
	if a.stopped || !g.cfg.DNS.AllowsLocal() {
		return
	}
	a.drains = append(pending(a.drains), a.srv.Swap(g.state(ps)))
}

// pending drops the drains whose states have no query left, so a host whose
// addresses change often (IPv6 privacy addresses, a flapping link) keeps
// only the states that still carry queries.
func pending(drains []func(context.Context) error) []func(context.Context) error {
	done, cancel := context.WithCancel(context.Background())
	cancel() // a drain asked with a spent context answers at once: nil if finished
	kept := drains[:0]
	for _, d := range drains {
		if d(done) != nil {
			kept = append(kept, d)
		}
	}
	return kept
}

// stopLocal ends the watcher. It must not be called with a.mu held: the
// watcher's callback takes it, and Close waits for the callback.
func (a *App) stopLocal() {
	a.mu.Lock()
	a.stopped = true
	w := a.local
	a.mu.Unlock()
	if w != nil {
		w.Close()
	}
}

// drainAll waits for every state the current generation served through.
func drainAll(ctx context.Context, drains []func(context.Context) error) error {
	for _, d := range drains {
		if err := d(ctx); err != nil {
			return err
		}
	}
	return nil
}
