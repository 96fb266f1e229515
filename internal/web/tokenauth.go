package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// SetTokens lets requests with "Authorization: Bearer TOKEN" in, judged by
// t (docs/dashboard.md, "API tokens"). Call it before Start.
func (s *Server) SetTokens(t *Tokens) {
	s.tokens = t
	if t != nil {
		t.mu.Lock()
		t.log = s.log
		t.mu.Unlock()
	}
}

// tokenGuard is guard for a request that carries an Authorization header.
// Every outcome past the header's form is counted under the token's name;
// the token itself is never logged or echoed.
func (s *Server) tokenGuard(h http.Handler, access Access, w http.ResponseWriter, r *http.Request) {
	_, raw, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	raw = strings.TrimSpace(raw)
	if raw == "" {
		tokenError(w, http.StatusUnauthorized, "Authorization: want \"Bearer TOKEN\" with a token from nxdns token add")
		return
	}
	t := s.tokens
	if t == nil || t.Dir() == "" {
		tokenError(w, http.StatusUnauthorized, "API tokens are off: they need filter.state_dir")
		return
	}
	e, result := t.check(raw, time.Now())
	status, msg := http.StatusOK, ""
	switch {
	case result == TokenUnreadable:
		status, msg = http.StatusServiceUnavailable, "the API tokens file cannot be read: every token is refused until it is fixed (the log says why)"
	case r.TLS == nil && !clientAddr(r).IsLoopback() && !t.overHTTP.Load():
		// Checked after the lookup so that the refusal counts under the
		// token's name: its owner should revoke it, it crossed the LAN in
		// the clear.
		result = TokenPlainHTTP
		status, msg = http.StatusForbidden, "API token sent over plain HTTP from another host: use the HTTPS endpoint (web.tls_listen), or set web.tokens_over_http; consider this token exposed"
	case result == TokenUnknown:
		status, msg = http.StatusUnauthorized, "unknown API token"
	case result == TokenRevoked:
		status, msg = http.StatusUnauthorized, "API token "+e.Name+" was revoked"
	case result == TokenExpired:
		status, msg = http.StatusUnauthorized, "API token "+e.Name+" expired"
	case access == SessionRead || access == SessionWrite:
		result = TokenScope
		status, msg = http.StatusForbidden, "this route takes a browser login, not an API token"
	case access == Mutating && e.Scope != ScopeControl:
		result = TokenScope
		status, msg = http.StatusForbidden, "API token "+e.Name+" has scope "+e.Scope+"; this route needs "+ScopeControl
	}
	t.count(e.Name, result)
	if status != http.StatusOK {
		tokenError(w, status, msg)
		return
	}
	h.ServeHTTP(w, r)
}

// isBearer reports whether r carries an API token: an Authorization
// header of the Bearer scheme (its name case-insensitive, RFC 7235).
func isBearer(r *http.Request) bool {
	scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return strings.EqualFold(scheme, "Bearer")
}

func tokenError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="nxdns"`)
	}
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
