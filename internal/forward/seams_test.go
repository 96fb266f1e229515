package forward_test

import (
	"github.com/nxdns/nxdns/internal/forward"
	"github.com/nxdns/nxdns/internal/server"
)

// The handler's seams: a zone answers queries and Names names clients. An
// external test package, because server will import forward (through the
// integrator's router) and an internal test importing server would cycle.
var (
	_ server.Resolver = (*forward.Zone)(nil)
	_ server.Names    = (*forward.Names)(nil)
)
