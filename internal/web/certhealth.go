package web

import (
	"fmt"
	"time"
)

// CertificateDegraded is how close to its expiry the serving certificate
// turns /api/health degraded (docs/design.md#tls-certificate: a week, after the log warned for
// one already): DoT and DoH clients are about to fail, plain DNS still works.
const CertificateDegraded = 7 * 24 * time.Hour

// CertificateHealth is the DoT/DoH serving certificate (present only when
// nxdns serves TLS).
type CertificateHealth struct {
	NotAfter    time.Time `json:"not_after"`
	DaysLeft    int       `json:"days_left"`
	ReloadError string    `json:"reload_error,omitempty"` // the last renewal that did not load
}

// AddCertificate adds the certificate condition: degraded within
// CertificateDegraded of its expiry or past it (never error: plain DNS is
// still answered), and a problem line for a renewal that did not load.
func (h *Health) AddCertificate(notAfter time.Time, reloadError string, now time.Time) {
	left := notAfter.Sub(now)
	h.Certificate = &CertificateHealth{NotAfter: notAfter.UTC(), DaysLeft: int(left / (24 * time.Hour)), ReloadError: reloadError}
	switch {
	case left <= 0:
		h.Problems = append(h.Problems, "the DoT/DoH certificate has expired: phones and browsers refuse it")
	case left < CertificateDegraded:
		h.Problems = append(h.Problems, fmt.Sprintf("the DoT/DoH certificate expires in %s", left.Round(time.Hour)))
	}
	if reloadError != "" {
		h.Problems = append(h.Problems, "the renewed DoT/DoH certificate did not load: "+reloadError)
	}
	if left < CertificateDegraded && h.Status == StatusOK {
		h.Status = StatusDegraded
	}
}
