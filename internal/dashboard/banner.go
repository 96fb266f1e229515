package dashboard

import (
	"html"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/clock"
	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/web"
)

// bannerLine is one line of the status banner every page shows when DNS is
// degraded or down (docs/dashboard.md "Status banner"): what a household
// notices, in its words, and the page that explains it. Error lines mean
// clients are failing now; the others, that something works less well.
type bannerLine struct {
	Text  string
	Href  string // the page that explains it
	Link  string // that link's words
	Error bool
}

// bannerFrom turns the health (/api/health's view, internal/web) into the
// banner's lines, most serious first. Nothing here is a name a client
// sent: the lines are fixed words, counts and the configuration's list
// names, escaped by the template like everything else.
func bannerFrom(h web.Health) []bannerLine {
	var out []bannerLine
	up := h.Upstreams
	switch {
	case h.Listeners.Up <= 0:
		out = append(out, bannerLine{Text: "nxdns is not answering on any of its addresses: devices cannot look up names.", Href: "/upstreams", Link: "details", Error: true})
	case up.Enabled > 0 && up.InBackoff == up.Enabled:
		out = append(out, bannerLine{Text: "Websites may not open: nxdns cannot reach any of its DNS providers right now. It keeps trying and recovers by itself.", Href: "/upstreams", Link: "what is wrong", Error: true})
	}
	if h.Clock.State == clock.Unsynchronized {
		out = append(out, bannerLine{Text: "This device's clock is not set yet: secure DNS providers may be refused until it is (it needs the internet time service).", Href: "/upstreams", Link: "upstreams"})
	}
	if h.Lists != nil && len(h.Lists.Stale) > 0 {
		out = append(out, bannerLine{Text: "Some block lists are out of date (" + strings.Join(h.Lists.Stale, ", ") + "): a few ads may get through until they download again.", Href: "/lists", Link: "lists"})
	}
	if h.Zones != nil && h.Zones.Down > 0 {
		out = append(out, bannerLine{Text: "Local names (" + strings.Join(h.Zones.DownZones, ", ") + ") are not answered: their resolver is unreachable.", Href: "/upstreams", Link: "upstreams"})
	}
	if h.History != nil && h.History.Store == "memory" && h.History.Problem != "" {
		out = append(out, bannerLine{Text: "The query log is kept in memory only: it starts empty after a restart (" + h.History.Problem + ").", Href: "/queries", Link: "query log"})
	}
	return out
}

// banner is the current banner, or none without a health source.
func (d *Dashboard) banner() []bannerLine {
	if d.deps.Health == nil {
		return nil
	}
	h := d.deps.Health()
	var recent []dnssec.Episode
	if d.deps.DNSSECBogus != nil && h.DNSSEC != nil && h.DNSSEC.Mode == "shadow" {
		recent = d.deps.DNSSECBogus()
	}
	return append(bannerFrom(h), dnssecBanner(h.DNSSEC, recent, d.now())...) // dnssec_page.go
}

// pageBanner answers GET /status/banner with the banner's inner HTML
// alone: app.js fetches it every bannerPoll so an open page shows a
// failure (and its end) without a reload.
func (d *Dashboard) pageBanner(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if err := bannerTmpl.Execute(w, d.banner()); err != nil {
		w.Write([]byte(html.EscapeString(err.Error())))
	}
}

// bannerTmpl is the layout's "banner" template alone.
var bannerTmpl = template.Must(template.New("banner").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")).Lookup("banner")

// pauseState is the header's "pause blocking" control: paused for
// everyone until Until, or not.
type pauseState struct {
	Paused bool
	Until  string // "15:04", local time
}

func (d *Dashboard) pause() pauseState {
	if d.deps.PausedUntil == nil {
		return pauseState{}
	}
	until, ok := d.deps.PausedUntil()
	if !ok {
		return pauseState{}
	}
	return pauseState{Paused: true, Until: until.Local().Format(time.Kitchen)}
}
