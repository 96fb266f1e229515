package history

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"time"
)

// Search bounds.
const (
	DefaultLimit = 50
	MaxLimit     = 500
	// scanCheck is how many rows a search reads between looks at its
	// context: a search over a month with no match reads every row, and the
	// request's deadline must still end it.
	scanCheck = 4096
)

// Filter selects rows for Search. Zero fields match everything.
type Filter struct {
	From, To time.Time // arrival in [From, To); zero From is the beginning, zero To now
	Client   string    // an address, or a client's name (case-insensitive), exact
	Name     string    // substring of the query name, case-insensitive
	Source   string    // exact: "pool", "blocked", "zone:lan" …
	Rcode    *int      // exact; query.RcodeNone for "none"
	Before   string    // a Page.Next cursor: only rows older than it
	Limit    int       // rows per page; 0 means DefaultLimit, at most MaxLimit
}

// Page is one page of Search results, newest first.
type Page struct {
	Rows []Row
	// Next is the cursor of the following (older) page, "" when there is
	// none. A search that ran out of time returns the rows it found and a
	// Next that continues where it stopped, with Partial set.
	Next    string
	Partial bool
}

// ErrBadCursor is returned for a Before that no Page produced.
var ErrBadCursor = errors.New("history: invalid cursor")

// Search returns the newest rows matching f, older than f.Before, the
// buffered ones included (a query is searchable before its flush).
func (h *History) Search(ctx context.Context, f Filter) (Page, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	upper := maxKey
	if f.Before != "" {
		k, err := hex.DecodeString(f.Before)
		if err != nil || len(k) != keyLen {
			return Page{}, ErrBadCursor
		}
		upper = k
	}
	if !f.To.IsZero() {
		if k := timeKey(f.To); bytes.Compare(k, upper) < 0 {
			upper = k
		}
	}
	var lower []byte
	if !f.From.IsZero() {
		lower = timeKey(f.From)
	}
	m := newMatcher(f)

	// Buffered rows: few, unordered; take the newest matches.
	var found []pendingRow
	for _, set := range h.buffered() {
		for _, b := range set {
			if bytes.Compare(b.key, upper) >= 0 || bytes.Compare(b.key, lower) < 0 || !m.nameOf(b.val) {
				continue
			}
			if r, err := decodeRow(b.key, b.val); err == nil && m.row(&r) {
				found = append(found, pendingRow{key: b.key, row: r})
			}
		}
	}

	stored, partialAt, err := h.scan(ctx, m, lower, upper, limit)
	if err != nil {
		return Page{}, err
	}
	found = append(found, stored...)
	slices.SortFunc(found, func(a, b pendingRow) int { return bytes.Compare(b.key, a.key) })
	// A row both buffered and stored (its flush committed during the
	// search) appears once.
	found = slices.CompactFunc(found, func(a, b pendingRow) bool { return bytes.Equal(a.key, b.key) })
	var p Page
	if partialAt != nil {
		// The scan stopped at partialAt: only rows at or above it are known
		// to be complete and in order.
		i := slices.IndexFunc(found, func(r pendingRow) bool { return bytes.Compare(r.key, partialAt) < 0 })
		if i >= 0 {
			found = found[:i]
		}
	}
	switch {
	case len(found) > limit:
		found = found[:limit]
		p.Next = hex.EncodeToString(found[limit-1].key)
	case partialAt != nil:
		p.Next, p.Partial = hex.EncodeToString(partialAt), true
	}
	p.Rows = make([]Row, len(found))
	for i := range found {
		p.Rows[i] = found[i].row
	}
	return p, nil
}

// scan walks stored rows from upper down to lower and returns up to
// limit+1 matches (one more than a page, so Search knows whether a next
// page exists). When ctx ends first it returns what it found and the key it
// stopped at.
func (h *History) scan(ctx context.Context, m matcher, lower, upper []byte, limit int) ([]pendingRow, []byte, error) {
	var out []pendingRow
	var stoppedAt []byte
	err := h.view(func(tx kvTx) error {
		c := tx.bucket(bucketRows).cursor()
		k, v := c.Seek(upper)
		if k == nil || bytes.Compare(k, upper) >= 0 {
			k, v = c.Prev()
		}
		if k == nil { // Seek past the end leaves some cursors nowhere
			k, v = c.Last()
			for k != nil && bytes.Compare(k, upper) >= 0 {
				k, v = c.Prev()
			}
		}
		for n := 0; k != nil && bytes.Compare(k, lower) >= 0; k, v = c.Prev() {
			if m.nameOf(v) {
				if r, err := decodeRow(k, v); err == nil && m.row(&r) { // a damaged row costs itself
					out = append(out, pendingRow{key: bytes.Clone(k), row: r})
					if len(out) > limit {
						return nil
					}
				}
			}
			if n++; n%scanCheck == 0 && ctx.Err() != nil {
				stoppedAt = bytes.Clone(k) // examined: the next page starts below it
				return nil
			}
		}
		return nil
	})
	return out, stoppedAt, err
}

// matcher is a Filter prepared for many rows.
type matcher struct {
	f    Filter
	name []byte // lower case
}

func newMatcher(f Filter) matcher {
	return matcher{f: f, name: []byte(strings.ToLower(f.Name))}
}

// name checks a stored row's name before it is decoded.
func (m matcher) nameBytes(n []byte) bool {
	return len(m.name) == 0 || containsFold(n, m.name)
}

func (m matcher) nameOf(v []byte) bool {
	n, ok := rowName(v)
	return ok && m.nameBytes(n)
}

func (m matcher) row(r *Row) bool {
	f := m.f
	switch {
	case !m.nameBytes([]byte(r.Name)):
		return false
	case f.Source != "" && r.Source != f.Source:
		return false
	case f.Rcode != nil && r.Rcode != *f.Rcode:
		return false
	case f.Client != "" && r.Client.String() != f.Client && !strings.EqualFold(r.ClientName, f.Client) && !strings.EqualFold(r.ClientMAC, f.Client):
		return false
	}
	return true
}

// containsFold reports whether needle (lower case ASCII) is in s, ignoring
// ASCII case. DNS names compare case-insensitively in ASCII only (RFC 4343).
func containsFold(s, needle []byte) bool {
	if len(needle) > len(s) {
		return false
	}
outer:
	for i := 0; i+len(needle) <= len(s); i++ {
		for j, c := range needle {
			b := s[i+j]
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			if b != c {
				continue outer
			}
		}
		return true
	}
	return false
}
