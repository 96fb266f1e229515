package app

import (
	"net/netip"
	"slices"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/ddr"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/tlscert"
)

// certState is the App's serving certificate (docs/design.md#tls-certificate). It outlives
// generations: a reload with the same files keeps the store (and refreshes
// it, so SIGHUP after a renewal takes effect at once), new files open a new
// one, and its poll picks up renewals between reloads.
type certState struct {
	store *tlscert.Store // nil while [tls] names no files
	stop  chan struct{}  // ends the store's poll
	done  chan struct{}  // closed when the poll has returned
}

// prepareCerts returns the store cfg asks for: the running one when the
// files are the same, a newly opened one otherwise (an error if its pair
// does not load: there would be nothing to serve with), nil without files.
func (a *App) prepareCerts(cfg config.TLS) (*tlscert.Store, error) {
	if cfg.CertFile == "" || cfg.KeyFile == "" {
		return nil, nil
	}
	if cur := a.certs.store; cur != nil {
		if c, k := cur.Files(); c == cfg.CertFile && k == cfg.KeyFile {
			cur.Refresh()
			return cur, nil
		}
	}
	return tlscert.Open(cfg.CertFile, cfg.KeyFile, tlscert.Options{Logger: a.log})
}

// commitCerts makes store the App's, starting its poll and stopping the
// previous store's.
func (a *App) commitCerts(store *tlscert.Store) {
	if store == a.certs.store {
		return
	}
	a.stopCerts()
	a.certs = certState{store: store}
	if store == nil {
		return
	}
	a.certs.stop, a.certs.done = make(chan struct{}), make(chan struct{})
	stop, done := a.certs.stop, a.certs.done
	go func() { // owned by the App: stopCerts waits for done
		defer close(done)
		store.Run(stop, tlscert.PollInterval)
	}()
}

func (a *App) stopCerts() {
	if a.certs.stop != nil {
		close(a.certs.stop)
		<-a.certs.done
	}
	a.certs = certState{}
}

// certSource is store as the server's CertSource: nil (no interface holding
// a nil pointer) when there is none.
func certSource(store *tlscert.Store) server.CertSource {
	if store == nil {
		return nil
	}
	return store
}

// certStatus is the serving certificate's state for /metrics and
// /api/health; ok is false while nxdns serves no TLS.
func (a *App) certStatus() (tlscert.Status, bool) {
	store := a.gen.Load().certs
	if store == nil || !a.gen.Load().cfg.TLS.Serving() {
		return tlscert.Status{}, false
	}
	return store.Status(), true
}

// ddrStage advertises the DoT/DoH/DoQ/DoH3 service to plain clients (RFC 9462), or is
// nil when nxdns serves neither.
func (g *generation) ddrStage() query.Stage {
	t := g.cfg.TLS
	if !t.Serving() || g.certs == nil {
		return nil
	}
	store := g.certs
	c := ddr.Config{
		DoTPort:  firstPort(t.DoTListen),
		DoHPort:  firstPort(t.DoHListen),
		DoQPort:  firstPort(t.DoQListen),
		DoH3Port: firstPort(t.DoH3Listen),
		Names:    func() []string { return store.Leaf().DNSNames },
	}
	seen := map[netip.Addr]bool{}
	for _, s := range slices.Concat(t.DoTListen, t.DoHListen, t.DoQListen, t.DoH3Listen) {
		if ap, err := netip.ParseAddrPort(s); err == nil && !ap.Addr().IsUnspecified() && !seen[ap.Addr()] {
			seen[ap.Addr()] = true
			c.Hints = append(c.Hints, ap.Addr())
		}
	}
	return ddr.New(c)
}

// firstPort is the port of the first address; DDR advertises one port per
// service (a household has one).
func firstPort(addrs []string) uint16 {
	for _, s := range addrs {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return ap.Port()
		}
	}
	return 0
}
