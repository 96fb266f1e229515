package dashboard

import (
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/nxdns/nxdns/internal/history"
)

// Parameter bounds: anything outside them is a 400, never a slow search or
// a huge answer.
const (
	maxRawQuery = 2048                 // bytes of the whole query string
	maxRange    = 366 * 24 * time.Hour // the longest history.max_days
	maxNameLen  = 255                  // a DNS name in presentation form
	maxClient   = 64                   // an IPv6 address or a client name (config's maxClientName)
	maxSource   = 260                  // "zone:" and a zone name
	defaultSpan = 24 * time.Hour
)

// paramError is a 400 with a message naming the parameter.
type paramError struct{ msg string }

func (e paramError) Error() string { return e.msg }

func badParam(name, format string, args ...any) error {
	return paramError{name + ": " + fmt.Sprintf(format, args...)}
}

// params reads a query string strictly: only the allowed keys, each at most
// once, the whole string bounded.
func params(u *url.URL, allowed ...string) (url.Values, error) {
	if len(u.RawQuery) > maxRawQuery {
		return nil, paramError{fmt.Sprintf("query string of %d bytes, at most %d", len(u.RawQuery), maxRawQuery)}
	}
	v, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, paramError{"query string: " + err.Error()}
	}
	for k, vs := range v {
		if !contains(allowed, k) {
			return nil, badParam(k, "unknown parameter (allowed: %s)", strings.Join(allowed, ", "))
		}
		if len(vs) > 1 {
			return nil, badParam(k, "given %d times", len(vs))
		}
	}
	return v, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// timeRange reads from and to (RFC 3339 or unix seconds); to defaults to
// now and from to a day before to.
func timeRange(v url.Values, now time.Time) (from, to time.Time, err error) {
	to, err = parseTime(v, "to", now)
	if err != nil {
		return
	}
	from, err = parseTime(v, "from", to.Add(-defaultSpan))
	if err != nil {
		return
	}
	switch {
	case !from.Before(to):
		err = badParam("from", "must be before to")
	case to.Sub(from) > maxRange:
		err = badParam("from", "the range is longer than %d days", int(maxRange.Hours()/24))
	}
	return
}

func parseTime(v url.Values, name string, def time.Time) (time.Time, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > 1<<40 {
			return time.Time{}, badParam(name, "%d is not a plausible unix time", n)
		}
		return time.Unix(n, 0), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil || t.Year() < 1970 || t.Year() > 9999 {
		return time.Time{}, badParam(name, "want RFC 3339 (2026-11-01T12:00:00Z) or unix seconds")
	}
	return t, nil
}

func intParam(v url.Values, name string, def, lo, hi int) (int, error) {
	s := v.Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, badParam(name, "want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// textParam is a printable string of at most max bytes.
func textParam(v url.Values, name string, max int) (string, error) {
	s := v.Get(name)
	if len(s) > max {
		return "", badParam(name, "%d bytes, at most %d", len(s), max)
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return "", badParam(name, "control characters are not allowed")
	}
	return s, nil
}

// queryFilter reads /api/queries's parameters.
func queryFilter(v url.Values, now time.Time) (history.Filter, error) {
	var f history.Filter
	var err error
	if v.Get("from") != "" || v.Get("to") != "" {
		if f.From, f.To, err = timeRange(v, now); err != nil {
			return f, err
		}
	}
	if f.Client, err = textParam(v, "client", maxClient); err != nil {
		return f, err
	}
	if f.Name, err = textParam(v, "name", maxNameLen); err != nil {
		return f, err
	}
	if f.Source, err = textParam(v, "source", maxSource); err != nil {
		return f, err
	}
	if s := v.Get("rcode"); s != "" {
		rc, ok := history.ParseRcode(s)
		if !ok {
			return f, badParam("rcode", "%q is not an rcode (NOERROR, NXDOMAIN, SERVFAIL, REFUSED, none …)", s)
		}
		f.Rcode = &rc
	}
	if f.Limit, err = intParam(v, "limit", history.DefaultLimit, 1, history.MaxLimit); err != nil {
		return f, err
	}
	if b := v.Get("before"); b != "" {
		if _, err := hex.DecodeString(b); err != nil || len(b) != 24 {
			return f, badParam("before", "not a cursor from a previous page's next")
		}
		f.Before = b
	}
	return f, nil
}
