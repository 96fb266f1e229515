package app

import (
	"net/netip"
	"strings"

	"go.uber.org/zap"

	"github.com/nxdns/nxdns/internal/config"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/server"
	"github.com/nxdns/nxdns/internal/web"
)

// The devices (docs/devices.md): the registry — the devices seen, the
// new-device list and its acknowledgements, the neighbour table — is the
// App's and outlives reloads; each generation names devices through its own
// devices.View (its [[clients]], lease files and PTR names).

// startDevices makes the registry, loads what filter.state_dir keeps of it
// and starts reading the neighbour table when the configuration asks.
func (a *App) startDevices(cfg config.Config) {
	a.devices = devices.NewRegistry(a.log.Named("devices"))
	if err := a.devices.UseStateDir(cfg.Filter.StateDir); err != nil {
		a.log.Warn("devices: the devices file was not read; every device starts new", zap.Error(err))
	}
	a.followNeighbours(cfg)
}

// followNeighbours starts or stops reading the neighbour table as
// devices.neighbours says. A table that cannot be read (no netlink in a
// sandbox) is logged once and leaves devices known by address.
func (a *App) followNeighbours(cfg config.Config) {
	cur := a.devices.Neighbours()
	switch want := cfg.Devices.ReadsNeighbours(); {
	case want && cur == nil:
		n, err := devices.WatchNeighbours(devices.NeighbourOptions{Logger: a.log.Named("neighbours")})
		if err != nil {
			a.log.Warn("devices: the neighbour table cannot be read; devices are known by address only", zap.Error(err))
			return
		}
		a.devices.SetNeighbours(n)
	case !want && cur != nil:
		a.devices.SetNeighbours(nil)
		cur.Close()
	}
}

// closeDevices stops the neighbour table and writes the devices file.
func (a *App) closeDevices() {
	if a.devices == nil {
		return
	}
	if n := a.devices.Neighbours(); n != nil {
		a.devices.SetNeighbours(nil)
		n.Close()
	}
	a.devices.Close()
}

// useDevices gives the generation its view of reg: the configuration's
// [[clients]], its lease files (followed until the generation closes) and
// its PTR names.
func (g *generation) useDevices(reg *devices.Registry) {
	st := devices.Static{
		ByMAC: map[devices.MAC]string{}, ByID: map[string]string{},
		ByAddr: g.cfg.ClientNames(), Reserved: map[string]bool{},
	}
	for _, c := range g.cfg.Clients {
		st.Reserved[c.Name] = true
		if m, ok := devices.ParseMAC(c.MAC); ok {
			st.ByMAC[m] = c.Name
		}
		if c.ClientID != "" {
			st.ByID[strings.ToLower(c.ClientID)] = c.Name
		}
	}
	for _, gr := range g.cfg.Filter.Groups {
		st.Reserved[gr.Name] = true
	}
	var files []devices.LeaseFile
	for _, l := range g.cfg.Devices.Leases {
		files = append(files, devices.LeaseFile{Format: l.Format, Path: l.Path})
	}
	g.leases = devices.NewLeases(files, g.log.Named("leases"), true)
	names := g.names
	g.devices = devices.NewView(reg, devices.ViewOptions{Static: st, Leases: g.leases, PTR: names.Name})
}

// trusted is dns.trusted_forwarders as the server matches them.
func (g *generation) trusted() []netip.Prefix { return g.cfg.DNS.TrustedForwarderPrefixes() }

// servedNames are the names of the DoT certificate, under which an SNI's
// first label is a ClientID; nil without a certificate.
func (g *generation) servedNames() func() []string {
	store := g.certs
	if store == nil {
		return nil
	}
	return func() []string {
		if leaf := store.Leaf(); leaf != nil {
			return leaf.DNSNames
		}
		return nil
	}
}

// identifier is the server's device namer; nil (the learned names alone)
// before useDevices, as in tests that build a generation by itself.
func (g *generation) identifier() server.Identifier {
	if g.devices == nil {
		return nil
	}
	return g.devices
}

// neighbourStats is the neighbour table's counters; ok is false while none
// is read.
func (a *App) neighbourStats() (devices.NeighbourStats, bool) {
	if n := a.devices.Neighbours(); n != nil {
		return n.Stats(), true
	}
	return devices.NeighbourStats{}, false
}

// devicesRoutes adds the devices API: the list shows which devices the
// household has, so it is private; an acknowledgement changes how a new
// device is filtered (devices.new_devices), so it is mutating.
func (a *App) devicesRoutes(s *web.Server) {
	s.Handle("GET /api/devices", a.devices.ListHandler(), web.Private)
	s.Handle("POST /api/devices/ack", a.devices.AckHandler(), web.Mutating)
}
