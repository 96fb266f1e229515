package web

import (
	"testing"
	"time"
)

func TestAddCertificate_degradedWithinAWeek(t *testing.T) {
	now := time.Now()
	for name, c := range map[string]struct {
		left     time.Duration
		reload   string
		start    Status
		want     Status
		problems int
	}{
		"30 days":           {30 * 24 * time.Hour, "", StatusOK, StatusOK, 0},
		"8 days":            {8 * 24 * time.Hour, "", StatusOK, StatusOK, 0},
		"6 days":            {6 * 24 * time.Hour, "", StatusOK, StatusDegraded, 1},
		"expired":           {-time.Hour, "", StatusOK, StatusDegraded, 1},
		"error stays error": {time.Hour, "", StatusError, StatusError, 1},
		"bad renewal":       {30 * 24 * time.Hour, "key does not match", StatusOK, StatusOK, 1},
	} {
		h := Health{Status: c.start}
		h.AddCertificate(now.Add(c.left), c.reload, now)
		if h.Status != c.want || len(h.Problems) != c.problems || h.Certificate == nil {
			t.Errorf("%s: status %q, problems %q; want %q with %d problems", name, h.Status, h.Problems, c.want, c.problems)
		}
	}
}
