package web

import (
	"html/template"
	"net/http"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/nxdns/nxdns/internal/query"
)

// maxPasswordForm bounds the login form: a password of 72 bytes and a
// return path.
const maxPasswordForm = 4 << 10

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>nxdns — log in</title>
<style>
body{font-family:system-ui,sans-serif;margin:0;display:flex;min-height:100vh;align-items:center;justify-content:center;background:#f4f5f7;color:#1d2230}
form{background:#fff;padding:2rem;border-radius:8px;box-shadow:0 1px 4px #0002;width:min(20rem,90vw)}
h1{font-size:1.3rem;margin:0 0 1rem}input{width:100%;box-sizing:border-box;font-size:1rem;padding:.6rem;margin:.4rem 0 1rem;border:1px solid #bbc;border-radius:4px}
button{width:100%;font-size:1rem;padding:.6rem;border:0;border-radius:4px;background:#2457c5;color:#fff}
.err{color:#b00020;margin:0 0 1rem}
</style></head><body>
<form method="post" action="/login">
<h1>nxdns</h1>
{{if .Error}}<p class="err" role="alert">{{.Error}}</p>{{end}}
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" autofocus required>
<input type="hidden" name="next" value="{{.Next}}">
<button type="submit">Log in</button>
</form></body></html>
`))

type loginView struct {
	Error string
	Next  string
}

// handleLogin serves GET and POST /login and POST /logout. Without a
// password there is nothing to log into: /login sends the browser home.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	l := s.login.Load()
	if l == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxPasswordForm) // before anything parses the form
	}
	next := safeNext(r.FormValue("next"))
	if r.Method == http.MethodGet {
		renderLogin(w, http.StatusOK, loginView{Next: next})
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
		return
	}
	if share := query.ClientShareKey(clientAddr(r)); !l.limiter.allow(share) {
		w.Header().Set("Retry-After", "60")
		renderLogin(w, http.StatusTooManyRequests, loginView{Error: "Too many attempts. Wait a minute and try again.", Next: next})
		s.limited.refused(share)
		return
	}
	password := r.PostFormValue("password")
	if bcrypt.CompareHashAndPassword(l.hash, []byte(password)) != nil {
		s.log.Warn("login failed: wrong password", zapClient(r))
		renderLogin(w, http.StatusUnauthorized, loginView{Error: "Wrong password.", Next: next})
		return
	}
	token, _ := l.create()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		MaxAge: int(sessionMax.Seconds()),
	})
	s.log.Info("login", zapClient(r))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if l := s.login.Load(); l != nil {
		l.end(r)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func renderLogin(w http.ResponseWriter, code int, v loginView) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	loginPage.Execute(w, v)
}

// safeNext keeps a return path on this server (docs/dashboard.md, "The
// login"): one leading slash not followed by a slash or a backslash, and no
// backslash, control character or white space anywhere. Browsers drop a
// tab or newline inside a URL and read a backslash as a slash, so
// "/<TAB>/evil.example" would send them to another host; anything else goes
// to "/". next is the decoded form value.
func safeNext(next string) string {
	if len(next) > 512 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	for _, c := range next {
		if c == '\\' || c == utf8.RuneError || unicode.IsControl(c) || unicode.IsSpace(c) {
			return "/"
		}
	}
	return next
}

// clientAddr is the client a request comes from, named as the DNS path
// names it (query.ClientOf): the login limiter keys on it, so the zones of
// one link-local host (fe80::1%eth0, fe80::1%eth1) share one bucket.
func clientAddr(r *http.Request) netip.Addr { return query.ClientOfRemote(r.RemoteAddr) }

func zapClient(r *http.Request) zap.Field { return zap.String("client", clientAddr(r).String()) }
