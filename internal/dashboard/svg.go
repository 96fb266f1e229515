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
