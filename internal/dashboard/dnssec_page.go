package dashboard

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/dnssec"
	"github.com/nxdns/nxdns/internal/web"
)

// bogusRecent is how far back a bogus verdict passed on in shadow mode
// still puts a line in the banner (docs/dashboard.md "Status banner"): a
// household that looked and chose shadow is not told of last week's.
const bogusRecent = 24 * time.Hour

// dnssecBanner is the banner's DNSSEC lines (docs/dnssec.md): enforce
// waiting for the clock, and bogus answers shadow passed on in the last
// bogusRecent. Both are warnings, not errors: every name still answers.
func dnssecBanner(h *web.DNSSECHealth, recent []dnssec.Episode, now time.Time) []bannerLine {
	if h == nil {
		return nil
	}
	var out []bannerLine
	if h.WaitingForClock {
		out = append(out, bannerLine{Text: "Secure-DNS checks (DNSSEC) are waiting for this device's clock to be set: until then, answers that fail them are still given.", Href: "/dnssec", Link: "DNSSEC"})
	}
	if h.Mode == "shadow" {
		n := 0
		for _, e := range recent {
			if !e.Enforced && now.Sub(e.Time) < bogusRecent {
				n++
			}
		}
		if n > 0 {
			words := strconv.Itoa(n) + " answers"
			if n == 1 {
				words = "1 answer"
			}
			out = append(out, bannerLine{Text: words + " failed secure-DNS checks (DNSSEC) in the last day and were given anyway (shadow mode): in enforce mode they would be refused.", Href: "/dnssec", Link: "which"})
		}
	}
	return out
}

// bogusRow is one line of the DNSSEC page's recent bogus verdicts.
type bogusRow struct {
	dnssec.Episode
	EDEName string // the EDE code's name (RFC 8914)
	NTAZone string // the zone the button exempts, without the root dot; "" for none
}

func (d *Dashboard) pageDNSSEC(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{}
	if d.deps.Health != nil {
		data["DNSSEC"] = d.deps.Health().DNSSEC // nil: this build reports none
	}
	var rows []bogusRow
	if d.deps.DNSSECBogus != nil {
		for _, e := range slices.Backward(d.deps.DNSSECBogus()) { // newest first
			zone := strings.TrimSuffix(e.Zone, ".")
			rows = append(rows, bogusRow{Episode: e, EDEName: dns.ExtendedErrorCodeToString[e.EDE], NTAZone: zone})
		}
	}
	data["Bogus"] = rows
	if d.deps.NTAs != nil {
		data["NTAs"] = d.deps.NTAs()
	}
	d.render(w, r, "dnssec", "DNSSEC", http.StatusOK, data)
}
