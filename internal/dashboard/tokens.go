package dashboard

import (
	"net/http"
	"time"

	"github.com/nxdns/nxdns/internal/web"
)

// maxTokenForm bounds the tokens page's forms: a name, a scope, a duration
// and the CSRF token.
const maxTokenForm = 4 << 10

// The tokens page (docs/dashboard.md, "API tokens"): list, add, revoke. A
// browser session only (web.SessionRead, web.SessionWrite): an API token
// cannot make or revoke tokens. Plain forms, no script: add answers the
// page itself with the new token, the only time it is shown.
func (d *Dashboard) registerTokens(s *web.Server) {
	s.Handle("GET /tokens", http.HandlerFunc(d.pageTokens), web.SessionRead)
	s.Handle("POST /tokens", http.HandlerFunc(d.addToken), web.SessionWrite)
	s.Handle("POST /tokens/revoke", http.HandlerFunc(d.revokeToken), web.SessionWrite)
}

type tokenRow struct {
	web.TokenEntry
	State string
	Live  bool
}

func (d *Dashboard) renderTokens(w http.ResponseWriter, r *http.Request, code int, data map[string]any) {
	t := d.deps.Tokens
	if t == nil || t.Dir() == "" {
		data["Off"] = true
		d.render(w, r, "tokens", "API tokens", code, data)
		return
	}
	entries, err := t.List()
	if err != nil && data["Error"] == nil {
		data["Error"] = err.Error()
	}
	now := d.now()
	rows := make([]tokenRow, 0, len(entries))
	for _, e := range entries {
		row := tokenRow{TokenEntry: e, State: "live", Live: e.Revoked.IsZero()}
		switch {
		case !e.Revoked.IsZero():
			row.State = "revoked " + e.Revoked.Local().Format("Jan 2 15:04")
		case !e.Expires.IsZero() && !now.Before(e.Expires):
			row.State = "expired"
		case !e.Expires.IsZero():
			row.State = "until " + e.Expires.Local().Format("Jan 2 15:04")
		}
		rows = append(rows, row)
	}
	data["Tokens"] = rows
	d.render(w, r, "tokens", "API tokens", code, data)
}

func (d *Dashboard) pageTokens(w http.ResponseWriter, r *http.Request) {
	d.renderTokens(w, r, http.StatusOK, map[string]any{})
}

func (d *Dashboard) addToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenForm)
	name, scope := r.PostFormValue("name"), r.PostFormValue("scope")
	var ttl time.Duration
	if v := r.PostFormValue("expires"); v != "" {
		var err error
		if ttl, err = time.ParseDuration(v); err != nil || ttl <= 0 {
			d.renderTokens(w, r, http.StatusBadRequest, map[string]any{"Error": "expires: want a duration such as 720h"})
			return
		}
	}
	if d.deps.Tokens == nil {
		d.renderTokens(w, r, http.StatusConflict, map[string]any{})
		return
	}
	token, err := web.AddToken(d.deps.Tokens.Dir(), name, scope, ttl, d.now())
	if err != nil {
		d.renderTokens(w, r, http.StatusBadRequest, map[string]any{"Error": err.Error()})
		return
	}
	d.renderTokens(w, r, http.StatusOK, map[string]any{"NewToken": token, "NewName": name})
}

func (d *Dashboard) revokeToken(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenForm)
	if d.deps.Tokens == nil {
		d.renderTokens(w, r, http.StatusConflict, map[string]any{})
		return
	}
	if err := web.RevokeToken(d.deps.Tokens.Dir(), r.PostFormValue("name"), d.now()); err != nil {
		d.renderTokens(w, r, http.StatusBadRequest, map[string]any{"Error": err.Error()})
		return
	}
	http.Redirect(w, r, "/tokens", http.StatusSeeOther)
}
