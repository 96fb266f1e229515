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

// axisW is the room left of a chart for the y axis' labels.
const axisW = 44

// yAxis draws horizontal grid lines at 0, half and the whole of peak over
// [axisW, chartW], for a plot of height h, with their values on the left.
func yAxis(b *strings.Builder, peak int64, h float64) {
	for _, f := range []float64{0, 0.5, 1} {
		y := h - f*h
		fmt.Fprintf(b, `<line class="grid" x1="%d" x2="%d" y1="%.1f" y2="%.1f"/>`, axisW, chartW, y, y)
		fmt.Fprintf(b, `<text class="axis" x="%d" y="%.1f" text-anchor="end">%s</text>`, axisW-6, min(max(y+4, 12), h), countLabel(f*float64(peak)))
	}
}

// countLabel is an axis value: "0", "12", "1.5k".
func countLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

// seriesSVG draws queries (and blocked within them) per step as bars, with
// a y axis (0, half, peak), the range's start, middle and end on the x
// axis, and each bar's time and counts as its hover title.
func seriesSVG(points []history.Point) template.HTML {
	var peak int64 = 1
	for _, p := range points {
		peak = max(peak, p.Total)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="queries over time, peak %d per bar" id="series" class="chart">`, chartW, chartH+chartPad, peak)
	yAxis(&b, peak, chartH)
	if n := len(points); n > 0 {
		w := float64(chartW-axisW) / float64(n)
		for i, p := range points {
			x := axisW + float64(i)*w
			h := float64(p.Total) / float64(peak) * chartH
			hb := float64(p.Blocked) / float64(peak) * chartH
			// The title is on a full-height transparent hit area, so a
			// bar of one query is as easy to hover as the peak.
			fmt.Fprintf(&b, `<g><title>%s: %d queries, %d blocked</title><rect class="hit" x="%.1f" y="0" width="%.1f" height="%d"/>`,
				p.Time.Local().Format("Jan 2 15:04"), p.Total, p.Blocked, x, w, chartH)
			fmt.Fprintf(&b, `<rect class="total" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, chartH-h, max(w-1, 0.5), h)
			if hb > 0 {
				fmt.Fprintf(&b, `<rect class="blocked" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, chartH-hb, max(w-1, 0.5), hb)
			}
			b.WriteString(`</g>`)
		}
		first, last := points[0].Time.Local(), points[n-1].Time.Local()
		layout := "15:04"
		switch span := last.Sub(first); {
		case span > 3*24*time.Hour:
			layout = "Jan 2"
		case span > 12*time.Hour:
			layout = "Mon 15:04"
		}
		mid := first.Add(last.Sub(first) / 2)
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d">%s</text>`, axisW, chartH+17, first.Format(layout))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="middle">%s</text>`, axisW+(chartW-axisW)/2, chartH+17, mid.Format(layout))
		fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" text-anchor="end">%s</text>`, chartW, chartH+17, last.Format(layout))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// latencySVG draws the latency histogram: one bar per bin with its bound
// below it, the count on the y axis and each bar's count as its title.
func latencySVG(bins []history.LatencyBin) template.HTML {
	var peak int64 = 1
	for _, l := range bins {
		peak = max(peak, l.Count)
	}
	var b strings.Builder
	const barH = chartH / 2 // a histogram of a dozen bars reads at half the height
	fmt.Fprintf(&b, `<svg viewBox="0 0 %d %d" role="img" aria-label="answer latency" id="latency" class="chart">`, chartW, barH+chartPad)
	yAxis(&b, peak, barH)
	if n := len(bins); n > 0 {
		w := float64(chartW-axisW) / float64(n)
		for i, l := range bins {
			h := float64(l.Count) / float64(peak) * barH
			label := "≥5s"
			switch {
			case l.LtMS >= 1000:
				label = fmt.Sprintf("<%gs", float64(l.LtMS)/1000)
			case l.LtMS > 0:
				label = fmt.Sprintf("<%d", l.LtMS)
			}
			title := "5 s or more"
			if l.LtMS > 0 {
				title = fmt.Sprintf("under %d ms", l.LtMS)
			}
			x := axisW + float64(i)*w
			fmt.Fprintf(&b, `<g><title>%s: %d answers</title><rect class="hit" x="%.1f" y="0" width="%.1f" height="%d"/><rect class="total" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/></g>`,
				title, l.Count, x, w, barH, x, barH-h, max(w-2, 0.5), h)
			fmt.Fprintf(&b, `<text class="axis" x="%.1f" y="%d" text-anchor="middle">%s</text>`, x+w/2, barH+17, label)
		}
	}
	b.WriteString(`</svg><p class="legend">bars: answers by time taken, in milliseconds unless marked s</p>`)
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
