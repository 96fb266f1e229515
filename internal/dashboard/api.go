package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/nxdns/nxdns/internal/episodes"
	"github.com/nxdns/nxdns/internal/history"
	"github.com/nxdns/nxdns/internal/query"
)

// searchTimeout bounds one /api/queries request: a search over a month of
// rows with no match reads every row, and on a Pi that takes seconds. Past
// it the page is partial and its next cursor continues the search.
const searchTimeout = 3 * time.Second

// The JSON of the API. Field names are stable: docs/reference/openapi.json
// documents them and TestOpenAPI_matchesTheServedFields keeps the two equal.

// OverviewJSON is GET /api/overview.
type OverviewJSON struct {
	From          time.Time         `json:"from"`
	To            time.Time         `json:"to"`
	ResolutionSec int64             `json:"resolution_seconds"`
	StepSec       int64             `json:"step_seconds"`
	Total         int64             `json:"total"`
	Blocked       int64             `json:"blocked"`
	BlockedShare  float64           `json:"blocked_share"`
	CacheHits     int64             `json:"cache_hits"`
	CacheLookups  int64             `json:"cache_lookups"`
	CacheHitRate  float64           `json:"cache_hit_rate"`
	MeanMS        float64           `json:"mean_ms"`
	Sources       map[string]int64  `json:"sources"`
	Rcodes        map[string]int64  `json:"rcodes"`
	Latency       []LatencyJSON     `json:"latency"`
	Series        []PointJSON       `json:"series"`
	TopClients    []TopJSON         `json:"top_clients"`
	TopDomains    []TopJSON         `json:"top_domains"`
	TopBlocked    []TopJSON         `json:"top_blocked"`
	Upstreams     []UpstreamUseJSON `json:"upstreams"`
	Approximate   bool              `json:"approximate"`
}

// LatencyJSON is one bin of the latency histogram; lt_ms 0 is the open last bin.
type LatencyJSON struct {
	LtMS  int64 `json:"lt_ms"`
	Count int64 `json:"count"`
}

// PointJSON is one step of the series.
type PointJSON struct {
	Time      time.Time `json:"time"`
	Total     int64     `json:"total"`
	Blocked   int64     `json:"blocked"`
	CacheHits int64     `json:"cache_hits"`
	MeanMS    float64   `json:"mean_ms"`
}

// TopJSON is one entry of a top list.
type TopJSON struct {
	Key   string `json:"key"`
	Label string `json:"label,omitempty"`
	Count int64  `json:"count"`
}

// UpstreamUseJSON is an upstream's answers in the range.
type UpstreamUseJSON struct {
	Upstream string  `json:"upstream"`
	Answers  int64   `json:"answers"`
	MeanMS   float64 `json:"mean_ms"`
}

// QueriesJSON is GET /api/queries.
type QueriesJSON struct {
	Queries []QueryJSON `json:"queries"`
	Next    string      `json:"next,omitempty"`
	Partial bool        `json:"partial"`
}

// QueryJSON is one stored query: every field of the query event.
type QueryJSON struct {
	Time       time.Time `json:"time"`
	Client     string    `json:"client"`
	ClientName string    `json:"client_name,omitempty"`
	ClientMAC  string    `json:"client_mac,omitempty"`
	Proto      string    `json:"proto"`
	Name       string    `json:"name"`
	Type       string    `json:"type"`
	Class      string    `json:"class"`
	Source     string    `json:"source"`
	Upstream   string    `json:"upstream,omitempty"`
	Tried      []string  `json:"tried,omitempty"`
	Cache      string    `json:"cache,omitempty"`
	Blocked    bool      `json:"blocked"`
	List       string    `json:"list,omitempty"`
	Rule       string    `json:"rule,omitempty"`
	Group      string    `json:"group,omitempty"`
	Rcode      string    `json:"rcode"`
	EDECode    *uint16   `json:"ede_code,omitempty"`
	EDEText    string    `json:"ede_text,omitempty"`
	DurationMS float64   `json:"duration_ms"`
	Answer     string    `json:"answer,omitempty"`
	Why        string    `json:"why"`
}

// ClientsJSON is GET /api/clients.
type ClientsJSON struct {
	From    time.Time    `json:"from"`
	To      time.Time    `json:"to"`
	Clients []ClientJSON `json:"clients"`
}

// ClientJSON is one client: its queries in the range and its name.
type ClientJSON struct {
	Address string `json:"address"`
	Name    string `json:"name,omitempty"`
	Queries int64  `json:"queries"`
	Static  bool   `json:"static"` // named in [[clients]]
}

// UpstreamsJSON is GET /api/upstreams.
type UpstreamsJSON struct {
	BudgetExhausted uint64         `json:"budget_exhausted"`
	Upstreams       []UpstreamJSON `json:"upstreams"`
}

// UpstreamJSON is one upstream of the serving pool, with its last day's
// answers from the history.
type UpstreamJSON struct {
	Index        int     `json:"index"`
	URL          string  `json:"url"`
	InBackoff    bool    `json:"in_backoff"`
	InFlight     int64   `json:"in_flight"`
	Slots        int     `json:"slots"`
	Successes    uint64  `json:"successes"`
	Failures     uint64  `json:"failures"`
	QueuedTotal  uint64  `json:"queued_total"`
	MeanMS       float64 `json:"mean_attempt_ms"`
	Answers24h   int64   `json:"answers_24h"`
	MeanAnswerMS float64 `json:"mean_answer_ms_24h"`
	// Episodes are its backoff episodes still in the App's log (the last
	// 200 of every upstream together, across reloads and, with a history
	// file, restarts), newest first.
	Episodes []EpisodeJSON `json:"episodes"`
}

// EpisodeJSON is one backoff episode of an upstream (docs/design.md#pool-health).
type EpisodeJSON struct {
	Start     time.Time  `json:"start"`
	End       *time.Time `json:"end"` // null while ongoing
	Ongoing   bool       `json:"ongoing"`
	DurationS float64    `json:"duration_s"` // up to now while ongoing
	Cause     string     `json:"cause"`      // the fault class that began it: "network error", "attempt timeout", …
	Detail    string     `json:"detail,omitempty"`
	Failures  int        `json:"failures"` // failed attempts and probes recorded in a row
}

func episodeJSON(e episodes.Episode, now time.Time) EpisodeJSON {
	j := EpisodeJSON{Start: e.Start.UTC(), Ongoing: e.Open(), DurationS: e.Duration(now).Seconds(),
		Cause: e.Cause, Detail: e.Detail, Failures: e.Failures}
	if !e.Open() {
		end := e.End.UTC()
		j.End = &end
	}
	return j
}

func overviewJSON(o history.Overview) OverviewJSON {
	j := OverviewJSON{
		From: o.From.UTC(), To: o.To.UTC(),
		ResolutionSec: int64(o.Resolution / time.Second), StepSec: int64(o.Step / time.Second),
		Total: o.Total, Blocked: o.Blocked, BlockedShare: o.BlockedShare,
		CacheHits: o.CacheHits, CacheLookups: o.CacheLookups, CacheHitRate: o.CacheHitRate,
		MeanMS: o.MeanMS, Sources: o.Sources, Rcodes: o.Rcodes, Approximate: o.Approximate,
		Latency: []LatencyJSON{}, Series: []PointJSON{}, Upstreams: []UpstreamUseJSON{},
	}
	for _, b := range o.Latency {
		j.Latency = append(j.Latency, LatencyJSON{LtMS: b.LtMS, Count: b.Count})
	}
	for _, p := range o.Series {
		j.Series = append(j.Series, PointJSON{Time: p.Time, Total: p.Total, Blocked: p.Blocked, CacheHits: p.CacheHits, MeanMS: p.MeanMS})
	}
	j.TopClients, j.TopDomains, j.TopBlocked = topJSON(o.TopClients), topJSON(o.TopDomains), topJSON(o.TopBlocked)
	for _, u := range o.Upstreams {
		j.Upstreams = append(j.Upstreams, UpstreamUseJSON{Upstream: u.Upstream, Answers: u.Answers, MeanMS: u.MeanMS})
	}
	return j
}

func topJSON(ts []history.Top) []TopJSON {
	out := make([]TopJSON, 0, len(ts))
	for _, t := range ts {
		out = append(out, TopJSON{Key: t.Key, Label: t.Label, Count: t.Count})
	}
	return out
}

func queryJSON(r history.Row) QueryJSON {
	q := QueryJSON{
		Time: r.Time.UTC(), Client: r.Client.String(), ClientName: r.ClientName, ClientMAC: r.ClientMAC, Proto: r.Proto.String(),
		Name: r.Name, Type: typeName(r.Qtype), Class: className(r.Qclass),
		Source: r.Source, Upstream: r.Upstream, Tried: r.Tried, Cache: r.Cache,
		Blocked: r.Filter.Blocked, List: r.Filter.List, Rule: r.Filter.Rule, Group: r.Filter.Group,
		Rcode: history.RcodeName(r.Rcode), DurationMS: float64(r.Duration.Microseconds()) / 1000,
		Answer: r.Answer, Why: Why(r),
	}
	if r.EDE != nil {
		code := r.EDE.Code
		q.EDECode, q.EDEText = &code, r.EDE.Text
	}
	return q
}

// writeJSON answers v with status 200.
func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store") // private data
	w.Write(append(body, '\n'))
}

// writeErr answers a parameter error with 400 and anything else with 500.
func writeErr(w http.ResponseWriter, err error) {
	var pe paramError
	code := http.StatusInternalServerError
	if errors.As(err, &pe) || errors.Is(err, history.ErrBadCursor) {
		code = http.StatusBadRequest
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	body, _ := json.Marshal(map[string]string{"error": err.Error()})
	w.Write(append(body, '\n'))
}

func (d *Dashboard) apiOverview(w http.ResponseWriter, r *http.Request) {
	o, err := d.overview(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, overviewJSON(o))
}

// overview reads from, to and top and computes the overview.
func (d *Dashboard) overview(r *http.Request) (history.Overview, error) {
	v, err := params(r.URL, routeParams["GET /api/overview"]...)
	if err != nil {
		return history.Overview{}, err
	}
	from, to, err := timeRange(v, d.now())
	if err != nil {
		return history.Overview{}, err
	}
	top, err := intParam(v, "top", history.DefaultTop, 1, history.MaxTop)
	if err != nil {
		return history.Overview{}, err
	}
	return d.deps.History.Overview(from, to, top)
}

func (d *Dashboard) apiQueries(w http.ResponseWriter, r *http.Request) {
	p, err := d.search(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	j := QueriesJSON{Queries: make([]QueryJSON, 0, len(p.Rows)), Next: p.Next, Partial: p.Partial}
	for _, row := range p.Rows {
		j.Queries = append(j.Queries, queryJSON(row))
	}
	writeJSON(w, j)
}

// routeParams are each API route's query parameters; any other is a 400.
var routeParams = map[string][]string{
	"GET /api/overview":       {"from", "to", "top"},
	"GET /api/queries":        {"client", "name", "source", "rcode", "from", "to", "limit", "before"},
	"GET /api/clients":        {"from", "to"},
	"GET /api/upstreams":      {},
	"GET /api/queries/export": {"format", "client", "name", "source", "rcode", "from", "to"},
}

func (d *Dashboard) search(r *http.Request) (history.Page, error) {
	v, err := params(r.URL, routeParams["GET /api/queries"]...)
	if err != nil {
		return history.Page{}, err
	}
	f, err := queryFilter(v, d.now())
	if err != nil {
		return history.Page{}, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), searchTimeout)
	defer cancel()
	return d.deps.History.Search(ctx, f)
}

func (d *Dashboard) apiClients(w http.ResponseWriter, r *http.Request) {
	c, err := d.clients(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, c)
}

func (d *Dashboard) clients(r *http.Request) (ClientsJSON, error) {
	v, err := params(r.URL, routeParams["GET /api/clients"]...)
	if err != nil {
		return ClientsJSON{}, err
	}
	from, to, err := timeRange(v, d.now())
	if err != nil {
		return ClientsJSON{}, err
	}
	o, err := d.deps.History.Overview(from, to, history.MaxTop)
	if err != nil {
		return ClientsJSON{}, err
	}
	j := ClientsJSON{From: o.From.UTC(), To: o.To.UTC(), Clients: []ClientJSON{}}
	static := map[string]string{}
	if d.deps.StaticClients != nil {
		static = d.deps.StaticClients()
	}
	seen := map[string]bool{}
	for _, t := range o.TopClients {
		name, ok := static[t.Key]
		if !ok {
			name = t.Label
		}
		j.Clients = append(j.Clients, ClientJSON{Address: t.Key, Name: name, Queries: t.Count, Static: ok})
		seen[t.Key] = true
	}
	for addr, name := range static {
		if !seen[addr] {
			j.Clients = append(j.Clients, ClientJSON{Address: addr, Name: name, Static: true})
		}
	}
	return j, nil
}

func (d *Dashboard) apiUpstreams(w http.ResponseWriter, r *http.Request) {
	if _, err := params(r.URL, routeParams["GET /api/upstreams"]...); err != nil {
		writeErr(w, err)
		return
	}
	u, err := d.upstreams()
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, u)
}

func (d *Dashboard) upstreams() (UpstreamsJSON, error) {
	now := d.now()
	o, err := d.deps.History.Overview(now.Add(-24*time.Hour), now, 1)
	if err != nil {
		return UpstreamsJSON{}, err
	}
	use := map[string]history.UpstreamUse{}
	for _, u := range o.Upstreams {
		use[u.Upstream] = u
	}
	j := UpstreamsJSON{Upstreams: []UpstreamJSON{}}
	if d.deps.Pool == nil {
		return j, nil
	}
	snap := d.deps.Pool()
	j.BudgetExhausted = snap.BudgetExhausted
	eps := map[string][]EpisodeJSON{}
	if d.deps.Episodes != nil {
		all := d.deps.Episodes()
		for i := len(all) - 1; i >= 0; i-- { // newest first
			eps[all[i].Upstream] = append(eps[all[i].Upstream], episodeJSON(all[i], now))
		}
	}
	for _, u := range snap.Upstreams {
		uj := UpstreamJSON{
			Index: u.Index, URL: u.URL, InBackoff: u.InBackoff, InFlight: u.InFlight, Slots: u.Slots,
			Successes: u.Successes, Failures: u.Failures, QueuedTotal: u.QueuedTotal,
			Answers24h: use[u.URL].Answers, MeanAnswerMS: use[u.URL].MeanMS,
			Episodes: eps[u.URL],
		}
		if uj.Episodes == nil {
			uj.Episodes = []EpisodeJSON{}
		}
		if h := u.AttemptLatency; h.Count > 0 {
			uj.MeanMS = h.Sum / float64(h.Count) * 1000
		}
		j.Upstreams = append(j.Upstreams, uj)
	}
	return j, nil
}

// Why says in words why a query was answered the way it was: the row's
// source, cache outcome, filter decision and upstreams put together.
func Why(r history.Row) string {
	if s, ok := switchWhy(r); ok {
		return s
	}
	switch {
	case r.Filter.Blocked || r.Source == query.SourceBlocked:
		s := "blocked"
		if r.Filter.List != "" {
			s += " by list " + r.Filter.List
		}
		if r.Filter.Rule != "" {
			s += " (rule " + r.Filter.Rule + ")"
		}
		if r.Filter.Group != "" {
			s += " for group " + r.Filter.Group
		}
		return s
	case r.Source == query.SourceCache:
		return "answered from the cache"
	case r.Source == query.SourceStale:
		return "a stale cache entry: the upstreams did not answer in time (EDE 3)"
	case r.Source == query.SourceLocal:
		return "a local answer (local records or a private name)"
	case r.Source == query.SourceRefused:
		return "refused: the client is outside dns.allow"
	case r.Source == query.SourceServer:
		return "rejected by nxdns: the query itself was malformed or unsupported"
	case r.Source == query.SourceRebinding:
		return "refused by rebinding protection: " + orNone(r.Upstream) + " answered an internal address (allow the name with the allow button or dns.rebinding_allow)"
	case r.Source == query.SourceRateLimited:
		return "refused: this device went past its rate limit (dns.rate_limit_qps, dns.rate_limit_burst)"
	case len(r.Source) > len(query.ZonePrefix) && r.Source[:len(query.ZonePrefix)] == query.ZonePrefix:
		return "forward zone " + r.Source[len(query.ZonePrefix):] + " via " + orNone(r.Upstream)
	case r.Source == query.SourcePool:
		s := "forwarded to " + orNone(r.Upstream)
		if len(r.Tried) > 1 {
			s += " after trying " + joinTried(r.Tried[:len(r.Tried)-1])
		}
		if r.Upstream == "" && len(r.Tried) > 0 {
			s = "no upstream answered (tried " + joinTried(r.Tried) + ")"
		}
		if r.Cache == query.CacheCoalesced {
			s += ", sharing an identical query in flight"
		}
		if r.EDE != nil {
			s += "; EDE " + itoa(int(r.EDE.Code))
			if r.EDE.Text != "" {
				s += " " + r.EDE.Text
			}
		}
		return s
	}
	return r.Source
}

func orNone(s string) string {
	if s == "" {
		return "no resolver"
	}
	return s
}

func joinTried(t []string) string {
	s := ""
	for i, u := range t {
		if i > 0 {
			s += ", "
		}
		s += u
	}
	return s
}
