package web

import (
	"net"
	"net/http"
	"net/netip"
)

// Access says who may use a route. /metrics and /api/health are Public; the
// features' own endpoints (the cache, the filter, the history and the
// dashboard) expose private data or change how DNS is answered, so SPEC §9
// serves them only behind a login — and, until a password is configured,
// only on a loopback web.listen, where just this host can reach them.
type Access uint8

const (
	// Public routes are served to anyone who reaches web.listen.
	Public Access = iota + 1
	// Private routes read private data (history, cache contents, client
	// names).
	Private
	// Mutating routes change state (flush the cache, pause filtering); they
	// take POST only and need the same protection as Private plus CSRF
	// protection once a login exists.
	Mutating
)

// Handle adds a feature's route (a net/http pattern such as
// "POST /api/cache/flush") with the access it needs. Call it before Start.
// Until the dashboard's login exists, Private and Mutating routes answer 403
// when web.listen is not a loopback address.
func (s *Server) Handle(pattern string, h http.Handler, access Access) {
	switch access {
	case Public:
	case Private, Mutating:
		h = s.loopbackOnly(h)
	default:
		panic("web: Handle with an unknown Access")
	}
	s.mux.Handle(pattern, h)
}

// loopbackOnly refuses h when web.listen is reachable from other hosts.
// The check is on the configured address, not the peer: a wildcard listen
// is reachable from the LAN even when this request came over loopback
// through a proxy.
func (s *Server) loopbackOnly(h http.Handler) http.Handler {
	open := isLoopbackListen(s.addr)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !open {
			http.Error(w, "this endpoint is served only on a loopback web.listen until web.password_file is set", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
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
