package dashboard

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/buildinfo"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/query"
	"github.com/nxdns/nxdns/internal/web"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var funcs = template.FuncMap{
	"pct":       func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
	"ms":        func(f float64) string { return fmt.Sprintf("%.1f ms", f) },
	"secs":      seconds,
	"when":      func(t time.Time) string { return t.Local().Format("Jan 2 15:04:05") },
	"breakdots": breakDots,
	"dur": func(d time.Duration) string {
		if d >= time.Hour {
			return fmt.Sprintf("%d h", int(d.Hours()))
		}
		return fmt.Sprintf("%d min", int(d.Minutes()))
	},
	"dnssecZone":   dnssecZone,   // dnssec.go
	"deviceGroups": deviceGroups, // manage.go
}

// pages are parsed once: the layout plus one page each.
var pages = func() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, p := range []string{"overview", "queries", "clients", "client", "upstreams", "lists", "cache", "devices", "changes", "groups", "tokens", "peers", "dnssec", "manage"} {
		out[p] = template.Must(template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html"))
	}
	return out
}()

func (d *Dashboard) pageRoutes() map[string]http.HandlerFunc {
	return map[string]http.HandlerFunc{
		"GET /{$}":              d.pageOverview,
		"GET /queries":          d.pageQueries,
		"GET /clients":          d.pageClients,
		"GET /clients/{client}": d.pageClient,
		"GET /upstreams":        d.pageUpstreams,
		"GET /lists":            d.pageLists,
		"GET /cache":            d.pageCache,
		"GET /devices":          d.pageDevices, // devices.go
		"GET /status/banner":    d.pageBanner,
		"GET /changes":          d.pageChanges,
		"GET /groups":           d.pageGroups,
		"GET /dnssec":           d.pageDNSSEC, // dnssec_page.go
	}
}

// staticHandler serves the CSS and JavaScript; public, as they hold nothing
// private and the login page could use them.
func staticHandler() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	return http.StripPrefix("/static/", http.FileServerFS(sub))
}

// breakDots is a name with a line-break opportunity after each dot, so a
// long name wraps between its labels on a phone rather than every few
// letters (the CSS still breaks a single label longer than the line).
// Each label is escaped.
func breakDots(name string) template.HTML {
	labels := strings.Split(name, ".")
	for i, l := range labels {
		labels[i] = template.HTMLEscapeString(l)
	}
	return template.HTML(strings.Join(labels, ".<wbr>"))
}

// render executes a page with the layout's common fields.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, page, title string, code int, data map[string]any) {
	data["Page"], data["Title"] = page, title
	data["CSRF"], data["LoggedIn"] = web.CSRFToken(r), web.LoggedIn(r)
	data["Version"] = buildinfo.Get().Version
	data["Degraded"] = d.deps.History.Problem()
	data["Banner"], data["Pause"] = d.banner(), d.pause()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// No script or style from anywhere but this server, nothing inline but
	// the SVG charts' attributes: an injected name could not run even if an
	// escape were missed.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if err := pages[page].ExecuteTemplate(w, "layout", data); err != nil {
		fmt.Fprintf(w, "<p>render failed: %s</p>", template.HTMLEscapeString(err.Error()))
	}
}

// pageError answers a bad parameter with the page and the message, 400.
func (d *Dashboard) pageError(w http.ResponseWriter, r *http.Request, page, title string, err error, data map[string]any) {
	code := http.StatusInternalServerError
	if _, ok := err.(paramError); ok || err == history.ErrBadCursor {
		code = http.StatusBadRequest
	}
	data["Error"] = err.Error()
	d.render(w, r, page, title, code, data)
}

type rangeLink struct {
	Key, Label string
	Current    bool
}

var ranges = []struct {
	key, label string
	span       time.Duration
}{{"1h", "hour", time.Hour}, {"24h", "day", 24 * time.Hour}, {"7d", "week", 7 * 24 * time.Hour}, {"30d", "month", 30 * 24 * time.Hour}}

func (d *Dashboard) pageOverview(w http.ResponseWriter, r *http.Request) {
	v, err := params(r.URL, "range")
	key := "24h"
	if err == nil && v.Get("range") != "" {
		key = v.Get("range")
	}
	span := time.Duration(0)
	var links []rangeLink
	for _, rg := range ranges {
		links = append(links, rangeLink{rg.key, rg.label, rg.key == key})
		if rg.key == key {
			span = rg.span
		}
	}
	if err == nil && span == 0 {
		err = badParam("range", "want 1h, 24h, 7d or 30d")
	}
	data := map[string]any{"Ranges": links}
	if err != nil {
		d.pageError(w, r, "overview", "Overview", err, data)
		return
	}
	now := d.now()
	o, err := d.deps.History.Overview(now.Add(-span), now, history.DefaultTop)
	if err != nil {
		d.pageError(w, r, "overview", "Overview", err, data)
		return
	}
	data["Data"], data["SeriesSVG"], data["LatencySVG"] = o, seriesSVG(o.Series), latencySVG(o.Latency)
	d.render(w, r, "overview", "Overview", http.StatusOK, data)
}

// queryForm is the search form as the user filled it in.
type queryForm struct{ Client, Name, Source, Rcode string }

var (
	sourceChoices = []string{"", query.SourcePool, query.SourceCache, query.SourceStale, query.SourceLocal, query.SourceBlocked, query.SourceRefused, query.SourceServer, query.SourceRebinding, query.SourceRateLimited}
	rcodeChoices  = []string{"", "NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED", "FORMERR", "NOTIMP", "none"}
)

func (d *Dashboard) pageQueries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	form := queryForm{Client: q.Get("client"), Name: q.Get("name"), Source: q.Get("source"), Rcode: q.Get("rcode")}
	data := map[string]any{"Form": form, "Sources": sourceChoices, "Rcodes": rcodeChoices, "Timeout": searchTimeout}
	// Empty form fields arrive as empty parameters: drop them before the
	// strict parse, so "source=&rcode=" means any.
	clean := url.Values{}
	for k, vs := range q {
		if len(vs) == 1 && vs[0] == "" {
			continue
		}
		clean[k] = vs
	}
	r2 := *r
	u := *r.URL
	u.RawQuery = clean.Encode()
	r2.URL = &u
	p, err := d.search(&r2)
	if err != nil {
		d.pageError(w, r, "queries", "Query log", err, data)
		return
	}
	rows := make([]QueryJSON, len(p.Rows))
	for i, row := range p.Rows {
		rows[i] = queryJSON(row)
	}
	data["Rows"], data["Partial"] = rows, p.Partial
	if p.Next != "" {
		clean.Set("before", p.Next)
		data["Next"] = "/queries?" + clean.Encode()
	}
	d.render(w, r, "queries", "Query log", http.StatusOK, data)
}

func (d *Dashboard) pageClients(w http.ResponseWriter, r *http.Request) {
	c, err := d.clients(r)
	data := map[string]any{}
	if err != nil {
		d.pageError(w, r, "clients", "Clients", err, data)
		return
	}
	data["Clients"] = c.Clients
	data["NewDevices"] = d.newDevices() // devices.go
	d.render(w, r, "clients", "Clients", http.StatusOK, data)
}

// filterNowText says in words which group's lists apply to a client now
// (its schedule decides) and whether its filtering is paused.
func filterNowText(f filter.Decision) string {
	s := "every list (no group applies now)"
	if f.Group != "" {
		s = "the lists of group " + f.Group + " (its schedule applies now)"
		if f.Group == "default" {
			s = "the lists of group default"
		}
	}
	if f.Paused {
		s += "; filtering is paused until " + f.PausedUntil.Local().Format("15:04")
	}
	return s
}

// clientTop is how many names the client page's top domains list.
const clientTop = 10

// topNames counts the rows' names and returns the n most asked, most
// first (ties by name).
func topNames(rows []QueryJSON, n int) []history.Top {
	counts := map[string]int64{}
	for _, r := range rows {
		if r.Name != "" {
			counts[r.Name]++
		}
	}
	out := make([]history.Top, 0, len(counts))
	for k, c := range counts {
		out = append(out, history.Top{Key: k, Count: c})
	}
	slices.SortFunc(out, func(a, b history.Top) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Key, b.Key)
	})
	return out[:min(len(out), n)]
}

// clientRecent is how many of a client's latest queries its page lists.
const clientRecent = 100

func (d *Dashboard) pageClient(w http.ResponseWriter, r *http.Request) {
	addr, err := netip.ParseAddr(r.PathValue("client"))
	if err != nil {
		d.pageError(w, r, "client", "Client", badParam("client", "not an IP address"), map[string]any{})
		return
	}
	now := d.now()
	p, err := d.deps.History.Search(r.Context(), history.Filter{Client: addr.String(), From: now.Add(-24 * time.Hour), To: now, Limit: clientRecent})
	if err != nil {
		d.pageError(w, r, "client", "Client", err, map[string]any{})
		return
	}
	o, err := d.deps.History.Overview(now.Add(-24*time.Hour), now, history.MaxTop)
	if err != nil {
		d.pageError(w, r, "client", "Client", err, map[string]any{})
		return
	}
	data := map[string]any{"Address": addr.String()}
	var name string
	if d.deps.StaticClients != nil {
		name = d.deps.StaticClients()[addr.String()]
	}
	var count int64
	for _, t := range o.TopClients {
		if t.Key == addr.String() {
			count = t.Count
			if name == "" {
				name = t.Label
			}
		}
	}
	rows := make([]QueryJSON, len(p.Rows))
	blocked := 0
	for i, row := range p.Rows {
		rows[i] = queryJSON(row)
		if rows[i].Blocked || row.Source == query.SourceBlocked {
			blocked++
		}
		if name == "" {
			name = row.ClientName
		}
		if data["MAC"] == nil && row.ClientMAC != "" {
			data["MAC"] = row.ClientMAC // the device at this address, latest first (docs/devices.md)
		}
	}
	data["Name"], data["Count"], data["Recent"], data["Blocked"] = name, count, rows, blocked
	data["Top"] = topNames(rows, clientTop)
	if d.deps.FilterNow != nil {
		data["FilterNow"] = filterNowText(d.deps.FilterNow(addr))
	}
	title := "Client " + addr.String()
	if name != "" {
		title = name
	}
	d.render(w, r, "client", title, http.StatusOK, data)
}

func (d *Dashboard) pageUpstreams(w http.ResponseWriter, r *http.Request) {
	u, err := d.upstreams()
	data := map[string]any{}
	if err != nil {
		d.pageError(w, r, "upstreams", "Upstreams", err, data)
		return
	}
	data["Upstreams"], data["BudgetExhausted"] = u.Upstreams, u.BudgetExhausted
	now := d.now()
	var strips []episodeStrip
	var recent []episodeRow
	for _, up := range u.Upstreams {
		strips = append(strips, episodeStrip{URL: up.URL, InBackoff: up.InBackoff, SVG: timelineSVG(up.Episodes, now.Add(-24*time.Hour), now)})
		for _, e := range up.Episodes {
			recent = append(recent, episodeRow{Upstream: up.URL, EpisodeJSON: e})
		}
	}
	slices.SortStableFunc(recent, func(a, b episodeRow) int { return b.Start.Compare(a.Start) })
	data["Strips"], data["Episodes"] = strips, recent[:min(len(recent), maxEpisodeRows)]
	d.render(w, r, "upstreams", "Upstreams", http.StatusOK, data)
}

// maxEpisodeRows bounds the upstreams page's table of episodes (the API
// has every one the log keeps).
const maxEpisodeRows = 50

// episodeStrip is one upstream's timeline on the upstreams page.
type episodeStrip struct {
	URL       string
	InBackoff bool
	SVG       template.HTML
}

// episodeRow is one line of the upstreams page's table of episodes.
type episodeRow struct {
	Upstream string
	EpisodeJSON
}
