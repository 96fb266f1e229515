package web

import "fmt"

// ListsHealth is the filter lists' condition (docs/design.md#health).
type ListsHealth struct {
	Configured int      `json:"configured"`
	Stale      []string `json:"stale,omitempty"` // never loaded, or older than three refresh intervals
}

// WithLists adds the lists condition: a list that has never loaded or is
// older than three refresh intervals makes an ok status degraded (queries
// are still answered, with fewer names blocked than the operator meant).
func (h Health) WithLists(configured int, stale []string) Health {
	if configured == 0 {
		return h
	}
	h.Lists = &ListsHealth{Configured: configured, Stale: stale}
	if len(stale) > 0 {
		h.Problems = append(h.Problems, fmt.Sprintf("%d of %d filter lists stale: %v", len(stale), configured, stale))
		if h.Status == StatusOK {
			h.Status = StatusDegraded
		}
	}
	return h
}
