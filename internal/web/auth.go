package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// Sessions of the dashboard login (docs/design.md#web-auth): a random token in an HttpOnly,
// SameSite=Strict cookie, and per session a CSRF token that every mutating
// request must carry in the X-CSRF-Token header (or a csrf form field).
// Sessions live in memory: a restart logs everyone out, which for a
// household's one or two operators costs a login and keeps no secret on
// the SD card.
const (
	sessionCookie = "nxdns_session"
	csrfHeader    = "X-CSRF-Token"
	// sessionIdle ends a session unused this long; sessionMax any session.
	sessionIdle = 24 * time.Hour
	sessionMax  = 7 * 24 * time.Hour
	// maxSessions bounds the table; the oldest session goes first.
	maxSessions = 64
)

type session struct {
	csrf    string
	created time.Time
	used    time.Time
}

// login is the password and the sessions it granted.
type login struct {
	hash []byte
	now  func() time.Time

	mu       sync.Mutex // guards sessions
	sessions map[string]*session

	limiter *loginLimiter
}

func newLogin(hash []byte) *login {
	return &login{hash: hash, now: time.Now, sessions: map[string]*session{}, limiter: newLoginLimiter()}
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// create starts a session and returns its token.
func (l *login) create() (token string, s *session) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.sessions) >= maxSessions {
		var oldest string
		for t, s := range l.sessions {
			if oldest == "" || s.created.Before(l.sessions[oldest].created) {
				oldest = t
			}
		}
		delete(l.sessions, oldest)
	}
	token = randomToken()
	s = &session{csrf: randomToken(), created: now, used: now}
	l.sessions[token] = s
	return token, s
}

// lookup returns the live session of r's cookie, or nil.
func (l *login) lookup(r *http.Request) *session {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) != 64 {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sessions[c.Value]
	if s == nil {
		return nil
	}
	if now.Sub(s.used) > sessionIdle || now.Sub(s.created) > sessionMax {
		delete(l.sessions, c.Value)
		return nil
	}
	s.used = now
	return s
}

func (l *login) end(r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		l.mu.Lock()
		delete(l.sessions, c.Value)
		l.mu.Unlock()
	}
}

type csrfKey struct{}

// CSRFToken is the CSRF token of r's session, for a page to hand to its
// scripts; "" without a login.
func CSRFToken(r *http.Request) string {
	if s, ok := r.Context().Value(csrfKey{}).(string); ok {
		return s
	}
	return ""
}

// LoggedIn reports whether r came with a session (so a page can offer
// "log out").
func LoggedIn(r *http.Request) bool { return CSRFToken(r) != "" }

// guard is the access check of a Private or Mutating route, decided per
// request because a reload can set or change the password.
func (s *Server) guard(h http.Handler, access Access) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Both listeners: an HTTPS one on the LAN makes the endpoint
		// reachable from the LAN whatever web.listen is.
		loopback := isLoopbackListen(s.addr) && (s.tlsAddr == "" || isLoopbackListen(s.tlsAddr))
		if access.mutating() && !sameOrigin(r) {
			// A page of another site posting through the operator's
			// browser: refused whether or not a login exists.
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		if isBearer(r) {
			// Judged by the token alone (tokenauth.go): no session
			// cookie is looked at, so a token request is never mistaken
			// for a browser's, nor a browser's exempted from CSRF. Another
			// scheme (Basic from a reverse proxy's own password) is no
			// token: that request is judged as a browser's below.
			s.tokenGuard(h, access, w, r)
			return
		}
		l := s.login.Load()
		if l == nil {
			if !loopback {
				http.Error(w, "this endpoint is served only on a loopback web.listen (and web.tls_listen) until web.password_file is set", http.StatusForbidden)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		sess := l.lookup(r)
		if sess == nil {
			unauthorized(w, r)
			return
		}
		if access.mutating() && !validCSRF(r, sess.csrf) {
			http.Error(w, "missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), csrfKey{}, sess.csrf)))
	})
}

// unauthorized sends a browser asking for a page to the login, and answers
// 401 to anything else (an API client, a script).
func unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && !isAPI(r.URL.Path) {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	w.Write([]byte(`{"error":"login required"}` + "\n"))
}

func isAPI(path string) bool { return len(path) >= 5 && path[:5] == "/api/" }

func validCSRF(r *http.Request, want string) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" && r.Header.Get("Content-Type") == "application/x-www-form-urlencoded" {
		got = r.PostFormValue("csrf")
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// sameOrigin reports whether a state-changing request comes from this
// server's own pages: browsers send Origin on every cross-origin POST (and
// Sec-Fetch-Site), curl sends neither.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

// SetPassword turns the login on with a bcrypt hash (LoadPasswordFile), or
// off with nil. A changed hash ends every session.
func (s *Server) SetPassword(hash []byte) {
	if old := s.login.Load(); old != nil && subtle.ConstantTimeCompare(old.hash, hash) == 1 {
		return
	}
	if hash == nil {
		s.login.Store(nil)
		return
	}
	s.login.Store(newLogin(hash))
}
