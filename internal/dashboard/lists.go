package dashboard

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/filter"
)

// listRow is one filter list as the lists page shows it.
type listRow struct {
	filter.ListStatus
	Age     string // since the copy in use was fetched or read; "" never loaded
	Outcome string // the last refresh's outcome in words
	Failed  bool
	// Downloaded: a list with a url, which "refresh now" downloads (a
	// local file is read again at every reload).
	Downloaded bool
}

// ageText is a duration as a person reads an age: the largest unit only.
func ageText(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return itoa(int(d.Minutes())) + " min"
	case d < 48*time.Hour:
		return itoa(int(d.Hours())) + " h"
	}
	return itoa(int(d.Hours()/24)) + " days"
}

func listRows(s filter.Snapshot) []listRow {
	rows := make([]listRow, 0, len(s.Lists))
	for _, l := range s.Lists {
		r := listRow{ListStatus: l, Downloaded: strings.HasPrefix(l.Source, "http://") || strings.HasPrefix(l.Source, "https://")}
		if !l.Loaded.IsZero() {
			r.Age = ageText(s.Now.Sub(l.Loaded))
		}
		switch {
		case l.Error != "" && l.Loaded.IsZero():
			r.Outcome, r.Failed = "failed, never loaded: "+l.Error, true
		case l.Error != "":
			r.Outcome, r.Failed = "failed, keeping the last good copy: "+l.Error, true
		case l.Loaded.IsZero():
			r.Outcome = "not loaded yet"
		default:
			r.Outcome = "ok"
		}
		rows = append(rows, r)
	}
	return rows
}

func (d *Dashboard) pageLists(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if d.deps.Filter != nil {
		s := d.deps.Filter()
		rows := listRows(s)
		data["Lists"], data["Inline"], data["Refresh"], data["Stale"] = rows, s.Inline, s.Refresh, s.Stale()
		data["HasURL"] = slices.ContainsFunc(rows, func(r listRow) bool { return r.Downloaded })
	}
	if d.deps.Allowed != nil {
		data["Allowed"] = d.deps.Allowed()
	}
	if d.deps.Blocked != nil {
		data["BlockedNames"] = d.deps.Blocked()
	}
	data["MaxPause"] = 24 * 60
	d.render(w, r, "lists", "Lists & filtering", http.StatusOK, data)
}

// cacheView is the cache page's numbers.
type cacheView struct {
	cache.Snapshot
	Answered uint64  // queries that reached the cache
	HitRate  float64 // fresh and stale answers over Answered
}

func (d *Dashboard) pageCache(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if d.deps.Cache != nil {
		s := d.deps.Cache()
		v := cacheView{Snapshot: s, Answered: s.Hits + s.Stale + s.Misses}
		if v.Answered > 0 {
			v.HitRate = float64(s.Hits+s.Stale) / float64(v.Answered)
		}
		data["Cache"] = v
	}
	d.render(w, r, "cache", "Cache", http.StatusOK, data)
}
