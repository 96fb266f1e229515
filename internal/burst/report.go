package burst

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/miekg/dns"
)

// Report is the one JSON object nxdns-burst prints. Latencies are in
// milliseconds, rounded to the microsecond.
type Report struct {
	Queries        int            `json:"queries"` // burst or fixed-rate queries sent; baseline excluded
	WallMS         float64        `json:"wall_ms"` // first query sent to last finished, wave gaps included
	P50MS          float64        `json:"p50_ms"`  // percentiles over every query: answered, timed out or failed
	P90MS          float64        `json:"p90_ms"`
	P99MS          float64        `json:"p99_ms"`
	MaxMS          float64        `json:"max_ms"`
	Rcodes         map[string]int `json:"rcodes"`   // answered queries by rcode name
	Timeouts       int            `json:"timeouts"` // no reply within the per-query timeout
	Errors         int            `json:"errors"`   // failed otherwise (refused socket, torn TCP reply)
	BaselineP50MS  float64        `json:"baseline_p50_ms"`
	StaircaseRatio float64        `json:"staircase_ratio"` // first wave's wall ÷ baseline median; 0 when unmeasured
	EDE            map[string]int `json:"ede"`             // Extended DNS Error info codes seen, by decimal code
	FirstWaveMS    float64        `json:"first_wave_ms"`   // wall time of the first wave; 0 in fixed-rate mode
}

// summarize folds the results into a report. The ratio needs both a first
// wave and at least one answered baseline query; otherwise it is 0.
func summarize(burst, base []result, wall, firstWave time.Duration) *Report {
	rep := &Report{
		Queries:     len(burst),
		WallMS:      ms(wall),
		FirstWaveMS: ms(firstWave),
		Rcodes:      map[string]int{},
		EDE:         map[string]int{},
	}
	lat := make([]float64, 0, len(burst))
	for _, r := range burst {
		lat = append(lat, ms(r.latency))
		switch {
		case r.timeout:
			rep.Timeouts++
		case r.err != nil:
			rep.Errors++
		default:
			rep.Rcodes[rcodeName(r.reply.Rcode)]++
			for _, code := range edeCodes(r.reply) {
				rep.EDE[strconv.Itoa(int(code))]++
			}
		}
	}
	slices.Sort(lat)
	rep.P50MS, rep.P90MS, rep.P99MS = Percentile(lat, 50), Percentile(lat, 90), Percentile(lat, 99)
	rep.MaxMS = Percentile(lat, 100)

	var baseLat []float64
	for _, r := range base {
		if r.reply != nil {
			baseLat = append(baseLat, ms(r.latency))
		}
	}
	slices.Sort(baseLat)
	rep.BaselineP50MS = Percentile(baseLat, 50)
	if rep.BaselineP50MS > 0 && firstWave > 0 {
		rep.StaircaseRatio = round3(ms(firstWave) / rep.BaselineP50MS)
	}
	return rep
}

// Percentile is the nearest-rank percentile (the smallest value with at
// least p% of the values at or below it) of sorted, which must be in
// ascending order; 0 for no values. Nearest rank returns an observed value,
// never an interpolation between two. p is clamped to (0, 100].
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	// p×n first: 7×100/100 is exactly 7, where 0.07×100 rounds above it.
	rank := int(math.Ceil(p * float64(len(sorted)) / 100))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func rcodeName(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "RCODE" + strconv.Itoa(rc)
}

// edeCodes lists the RFC 8914 info codes in m's OPT record.
func edeCodes(m *dns.Msg) []uint16 {
	opt := m.IsEdns0()
	if opt == nil {
		return nil
	}
	var codes []uint16
	for _, o := range opt.Option {
		if e, ok := o.(*dns.EDNS0_EDE); ok {
			codes = append(codes, e.InfoCode)
		}
	}
	return codes
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }
