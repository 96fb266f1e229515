package dashboard

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/nxdns/nxdns/internal/history"
)

// Charts are inline SVG drawn here: a few dozen rectangles need no
// charting library, work without JavaScript and scale to a phone's width.
// Only numbers and fixed labels go into them (names never do), so building
// the markup by hand cannot inject anything.
const (
	chartW, chartH = 720, 180
	chartPad       = 22 // room for the axis labels
)

// seriesSVG draws queries (and blocked within them) per step as bars.
func seriesSVG(points []history.Point) template.HTML {
	var peak int64 = 1
	for _, p := range points {
		peak = max(peak, p.Total)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="queries over time" id="series">`, chartW, chartH+chartPad)
	if n := len(points); n > 0 {
		w := float64(chartW) / float64(n)
		for i, p := range points {
			x := float64(i) * w
			h := float64(p.Total) / float64(peak) * chartH
			hb := float64(p.Blocked) / float64(peak) * chartH
			fmt.Fprintf(&b, `<rect class="total" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d queries, %d blocked</title></rect>`,
				x, chartH-h, max(w-1, 0.5), h, p.Time.Local().Format("Jan 2 15:04"), p.Total, p.Blocked)
			if hb > 0 {
				fmt.Fprintf(&b, `<rect class="blocked" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, chartH-hb, max(w-1, 0.5), hb)
			}
		}
		first, last := points[0].Time.Local(), points[n-1].Time.Local()
		layout := "15:04"
		switch span := last.Sub(first); {
		case span > 3*24*time.Hour:
			layout = "Jan 2"
		case span > 12*time.Hour:
			layout = "Mon 15:04"
		}
		fmt.Fprintf(&b, `<text class="axis" x="0" y="%d">%s</text>`, chartH+15, first.Format(layout))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`, chartW, chartH+15, last.Format(layout))
	}
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="12" text-anchor="end">peak %d</text></svg>`, chartW, peak)
	return template.HTML(b.String())
}

// latencySVG draws the latency histogram.
func latencySVG(bins []history.LatencyBin) template.HTML {
	var peak int64 = 1
	for _, l := range bins {
		peak = max(peak, l.Count)
	}
	var b strings.Builder
	const barH = chartH / 2 // a histogram of a dozen bars reads at half the height
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="answer latency" id="latency">`, chartW, barH+chartPad)
	if n := len(bins); n > 0 {
		w := float64(chartW) / float64(n)
		for i, l := range bins {
			h := float64(l.Count) / float64(peak) * barH
			label := "≥5 s"
			if l.LtMS > 0 {
				label = fmt.Sprintf("<%d ms", l.LtMS)
			}
			fmt.Fprintf(&b, `<rect class="total" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %d</title></rect>`,
				float64(i)*w, barH-h, w-2, h, label, l.Count)
			fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, float64(i)*w+w/2, barH+15, label)
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// timelineH is the height of an upstream's backoff strip; minStretch the
// narrowest an episode is drawn (of chartW), so a brief outage shows.
const (
	timelineH  = 18
	minStretch = 3.0
)

// timelineSVG draws an upstream's backoff episodes over [from, to) as
// stretches on a strip (the upstreams page: one strip per upstream over
// the last 24 hours). An episode shorter than minStretch is drawn that
// wide. Only times go into it.
func timelineSVG(eps []EpisodeJSON, from, to time.Time) template.HTML {
	var b strings.Builder
	span := to.Sub(from).Seconds()
	fmt.Fprintf(&b, `<svg class="timeline" viewBox="0 0 %d %d" role="img" aria-label="backoff episodes over the last 24 hours">`, chartW, timelineH+chartPad-6)
	fmt.Fprintf(&b, `<rect class="track" x="0" y="0" width="%d" height="%d"/>`, chartW, timelineH)
	for _, e := range eps {
		end := to
		if e.End != nil {
			end = *e.End
		}
		if !end.After(from) || !e.Start.Before(to) || span <= 0 {
			continue
		}
		x0 := max(e.Start.Sub(from).Seconds(), 0) / span * chartW
		x1 := min(end.Sub(from).Seconds(), span) / span * chartW
		w := max(x1-x0, minStretch)
		x0 = min(x0, chartW-w) // one that just began still shows, at the right edge
		class, until := "backoff", "ongoing"
		if e.Ongoing {
			class = "backoff ongoing"
		} else {
			until = end.Local().Format("15:04:05")
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="0" width="%.1f" height="%d"><title>%s – %s (%s)</title></rect>`,
			class, x0, w, timelineH, e.Start.Local().Format("Jan 2 15:04:05"), until, seconds(e.DurationS))
	}
	fmt.Fprintf(&b, `<text class="axis" x="0" y="%d">%s</text>`, timelineH+12, from.Local().Format("Mon 15:04"))
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">now</text></svg>`, chartW, timelineH+12)
	return template.HTML(b.String())
}

// seconds is a duration in seconds as a person reads it: "42 s", "3 min
// 5 s", "2 h 10 min".
func seconds(s float64) string {
	d := time.Duration(s * float64(time.Second)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d min %d s", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%d h %d min", int(d.Hours()), int(d.Minutes())%60)
}
