package server

// The listener caps, for what must size beside them (the descriptor check
// at start, internal/app): per address family, at most MaxTCPConns TCP,
// DoT and DoH connections are open and at most MaxUDPInFlight UDP queries
// run, each of which may hold a socket of its own upstream of nxdns (a
// forward zone's UDP exchange).
const (
	MaxTCPConns    = maxTCPConns
	MaxUDPInFlight = maxUDPInFlight
)
