package web

// DNSSECHealth is DNSSEC validation's condition (docs/dnssec.md). It never
// changes the status: validation's verdicts are per name, and an enforce
// that waits for the clock answers as shadow does.
type DNSSECHealth struct {
	Mode      string `json:"mode"`      // off, shadow or enforce, as configured
	Enforcing bool   `json:"enforcing"` // bogus answers are SERVFAIL now
	// WaitingForClock: mode is enforce, but the system clock is not set,
	// so nxdns behaves as shadow.
	WaitingForClock bool   `json:"waiting_for_clock"`
	Bogus           uint64 `json:"bogus"` // bogus verdicts since start
}

// WithDNSSEC adds the dnssec condition; an enforce waiting for the clock is
// named as a problem.
func (h Health) WithDNSSEC(d DNSSECHealth) Health {
	h.DNSSEC = &d
	if d.WaitingForClock {
		h.Problems = append(h.Problems, "dnssec: enforce waits for the system clock to be set; until then bogus answers are given as in shadow mode")
	}
	return h
}
