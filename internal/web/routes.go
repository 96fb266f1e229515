package web

import (
	"net"
	"net/http"
	"net/netip"
	"slices"
)

// Access says who may use a route. /metrics and /api/health are Public; the
// features' own endpoints (the cache, the filter, the history and the
// dashboard) expose private data or change how DNS is answered, so docs/design.md#web-auth
// serves them only behind a login — and, until a password is configured,
// only on a loopback web.listen, where just this host can reach them.
type Access uint8

const (
	// Public routes are served to anyone who reaches web.listen.
	Public Access = iota + 1
	// Private routes read private data (history, cache contents, client
	// names).
	Private
	// Mutating routes change state (flush the cache, pause filtering, allow
	// a name); they take POST or DELETE, never GET, and need the same
	// protection as Private plus CSRF protection once a login exists.
	Mutating
	// SessionRead and SessionWrite are Private and Mutating for a browser
	// session only: an API token is refused (the tokens page, which must
	// not let a token make or revoke tokens).
	SessionRead
	SessionWrite
)

// mutating reports whether a route changes state (POST or DELETE, CSRF).
func (a Access) mutating() bool { return a == Mutating || a == SessionWrite }

// Handle adds a feature's route (a net/http pattern such as
// "POST /api/cache/flush") with the access it needs. Call it before Start.
//
// With a password (SetPassword), Private and Mutating routes need a login
// session and Mutating ones also its CSRF token (auth.go). Without one they
// answer 403 unless web.listen is a loopback address (the check is on the
// configured address, not the peer: a wildcard listen is reachable from the
// LAN even when this request came over loopback through a proxy). Mutating
// routes refuse cross-origin requests either way.
func (s *Server) Handle(pattern string, h http.Handler, access Access) {
	switch access {
	case Public:
	case Private, Mutating, SessionRead, SessionWrite:
		h = s.guard(h, access)
	default:
		panic("web: Handle with an unknown Access")
	}
	s.mux.Handle(pattern, h)
	s.mu.Lock()
	s.routes = append(s.routes, pattern)
	s.mu.Unlock()
}

// Routes are the patterns added with Handle, in the order they were added:
// what a test compares with the API's documentation (docs/reference/openapi.json).
func (s *Server) Routes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.routes)
}

// isLoopbackListen reports whether addr (host:port) binds only loopback.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
