package cache

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nxdns/nxdns/internal/query"
)

// Explanation describes one cached entry for GET /api/cache/entry
// (docs/design.md#cache-api): what was asked, how old the answer is, how long it stays, what the
// clamps did, who answered, and whether it is served fresh or stale.
type Explanation struct {
	Name        string  `json:"name"`
	Type        string  `json:"type"`
	Class       string  `json:"class"`
	DO          bool    `json:"do"`
	CD          bool    `json:"cd"`
	Rcode       string  `json:"rcode"`
	Negative    bool    `json:"negative"`
	AgeS        float64 `json:"age_s"`
	TTLS        uint32  `json:"ttl_s"`          // the entry's lifetime, after clamping
	TTLLeftS    float64 `json:"ttl_left_s"`     // negative once expired
	UpstreamTTL uint32  `json:"upstream_ttl_s"` // what the answer's records said
	Clamp       string  `json:"clamp,omitempty"`
	Origin      string  `json:"origin"`               // the upstream or zone resolver
	Via         string  `json:"via"`                  // "pool" or "zone:NAME"
	Pool        string  `json:"pool,omitempty"`       // the group whose own pool answered; "" for the main pool
	State       string  `json:"state"`                // fresh, stale (servable) or expired (past stale_max_age)
	RetryInS    float64 `json:"retry_in_s,omitempty"` // after a failed refresh: served stale without asking for this long
	Answer      string  `json:"answer,omitempty"`
}

// Explain describes the entries for name (every DO/CD variant) of type
// qtype, or of every type when qtype is 0.
func (c *Cache) Explain(name string, qtype uint16) []Explanation {
	st, set := c.state()
	out := []Explanation{}
	if st == nil {
		return out
	}
	name = strings.ToLower(dns.Fqdn(name))
	now := c.now().UnixNano()
	st.each(func(k key, e *entry) {
		if k.name != name || qtype != 0 && k.qtype != qtype {
			return
		}
		x := Explanation{
			Name: k.name, Type: dns.Type(k.qtype).String(), Class: dns.Class(k.qclass).String(),
			DO: k.flags&flagDO != 0, CD: k.flags&flagCD != 0,
			Rcode: dns.RcodeToString[e.msg.Rcode], Negative: e.negative,
			AgeS:        time.Duration(now - e.stored).Seconds(),
			TTLS:        e.ttl,
			TTLLeftS:    time.Duration(e.expires - now).Seconds(),
			UpstreamTTL: e.upTTL, Clamp: e.clamp, Origin: e.origin, Via: e.source, Pool: k.pool,
			Answer: query.Summary(&e.msg),
		}
		if r := e.retryAt.Load(); r > now {
			x.RetryInS = time.Duration(r - now).Seconds()
		}
		switch {
		case e.fresh(now):
			x.State = "fresh"
		case e.usableStale(now, set.staleMaxAge):
			x.State = "stale"
		default:
			x.State = "expired"
		}
		out = append(out, x)
	})
	return out
}

// FlushHandler serves POST /api/cache/flush[?name=NAME]: every entry, or
// NAME's and those of every name below it. It answers {"flushed": N}.
func (c *Cache) FlushHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("name")
		if name != "" {
			if _, ok := dns.IsDomainName(name); !ok {
				http.Error(w, "name: not a domain name", http.StatusBadRequest)
				return
			}
		}
		writeJSON(w, map[string]int{"flushed": c.Flush(name)})
	})
}

// EntryHandler serves GET /api/cache/entry?name=NAME[&type=TYPE]: the
// entries for NAME (of TYPE, default every type), explained.
func (c *Cache) EntryHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		name := q.Get("name")
		if _, ok := dns.IsDomainName(name); name == "" || !ok {
			http.Error(w, "name: required, a domain name", http.StatusBadRequest)
			return
		}
		var qtype uint16
		if t := q.Get("type"); t != "" {
			var ok bool
			if qtype, ok = dns.StringToType[strings.ToUpper(t)]; !ok {
				http.Error(w, "type: not a DNS type (A, AAAA, MX, ...)", http.StatusBadRequest)
				return
			}
		}
		writeJSON(w, map[string]any{"entries": c.Explain(name, qtype)})
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v) // a client that went away is not ours to report
}
