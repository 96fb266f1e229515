package dashboard

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nxdns/nxdns/internal/cache"
	"github.com/nxdns/nxdns/internal/devices"
	"github.com/nxdns/nxdns/internal/filter"
	"github.com/nxdns/nxdns/internal/peers"
)

const openapiFile = "../../docs/reference/openapi.json"

var updateOpenAPI = flag.Bool("update", false, "rewrite docs/reference/openapi.json from the code")

// The API's documentation besides what reflection finds: a summary per
// route and a description per parameter. A route or parameter without one
// fails the test.
var (
	routeDocs = map[string]struct {
		summary string
		body    any
	}{
		"GET /api/overview":       {"Totals, blocked share, cache hit rate, series over time, top clients, domains and blocked names, per-upstream answers and latency for [from, to), from the pre-aggregated buckets (minute buckets up to two days, hour buckets beyond; the range is rounded out to whole buckets).", OverviewJSON{}},
		"GET /api/queries":        {"Stored queries, newest first, filtered; every field of the query event and why it was answered that way. Paginated with next/before. A search that runs out of its 3 s budget returns what it found with partial=true and a next cursor that continues it.", QueriesJSON{}},
		"GET /api/clients":        {"Clients seen in [from, to) with their query counts, and the clients named in [[clients]].", ClientsJSON{}},
		"GET /api/queries/export": {"Every stored query matching the search's filters in [from, to) (no range: the whole store), oldest first, streamed as NDJSON (one object per line, the fields of a query in /api/queries) or CSV (a header line, the same fields, tried joined with spaces). Memory stays constant whatever the range; rows still in the buffer (one history.flush interval) come with the next flush. At most two exports run at once (503 with Retry-After beyond). Docs: docs/history.md, Export.", QueryJSON{}},
		"GET /api/upstreams":      {"The serving pool's upstreams: health, backoff, slots in use, attempt counters since the last reload, their answers over the last 24 hours from the history, and their backoff episodes, newest first (the last 200 of all upstreams together, kept across reloads and, with history.path, restarts).", UpstreamsJSON{}},
	}
	paramDocs = map[string]string{
		"from":   "Start of the range, RFC 3339 or unix seconds. Default: a day before to. The range is at most 366 days.",
		"to":     "End of the range (exclusive), RFC 3339 or unix seconds. Default: now.",
		"top":    "Length of each top list, 1 to 100. Default 10.",
		"client": "A client's address, its name or its device's MAC address (case-insensitive), exact.",
		"name":   "A substring of the query name, case-insensitive; at most 255 bytes.",
		"source": "Exact source: pool, cache, stale, local, blocked, refused, server, rebinding, ratelimited, or zone:NAME.",
		"rcode":  "Exact answer code: NOERROR, NXDOMAIN, SERVFAIL, REFUSED, …, or none (no answer sent).",
		"limit":  "Rows per page, 1 to 500. Default 50.",
		"before": "The next cursor of the previous page: only older rows.",
		"format": "ndjson (default) or csv.",
	}
)

// filterDocs document the filter's routes (internal/filter, mounted by
// internal/app): a summary, the parameters with their descriptions, the
// answer's type, and whether the route changes state.
var filterDocs = map[string]struct {
	summary string
	params  [][2]string
	body    any
}{
	"POST /api/filter/pause": {"Pauses filtering for everyone, one client or every client of a group; the pause ends by itself.",
		[][2]string{{"minutes", "How long, 1 to 10080 minutes. Required."}, {"client", "An IP address or a [[clients]] name; absent: everyone."}, {"group", "A [[filter.groups]] name: every client of the group (default: every client), instead of client."}}, filter.PauseAnswer{}},
	"POST /api/filter/resume": {"Ends that client's or group's pause, or every pause.",
		[][2]string{{"client", "An IP address or a [[clients]] name; absent: every pause."}, {"group", "A [[filter.groups]] name, instead of client."}}, filter.PauseAnswer{}},
	"GET /api/filter/check": {"What a query for the name would get now from this client, and why (explanation).",
		[][2]string{{"name", "The domain name. Required."}, {"client", "An IP address or a [[clients]] name; absent: a client in no group."}}, filter.Decision{}},
	"GET /api/filter/lists": {"Each filter list: rules, lines taken, ignored and rejected, when the copy in use was loaded, the last refresh error, queries blocked.",
		nil, []filter.ListStatus{}},
	"GET /api/filter/allow": {"The names allowed from the dashboard (each with the names below it).", nil, filter.AllowedAnswer{}},
	"POST /api/filter/allow": {"Allows a name and every name below it for every client, over every list (like an allowlist entry), kept in filter.state_dir across restarts.",
		[][2]string{{"name", "The domain name to allow. Required."}}, filter.AllowAnswer{}},
	"DELETE /api/filter/allow": {"Ends an allow from the dashboard.",
		[][2]string{{"name", "The domain name allowed before. Required."}}, filter.AllowAnswer{}},
	"POST /api/filter/allow/remove": {"Ends an allow from the dashboard (the same as DELETE /api/filter/allow, for clients that only POST).",
		[][2]string{{"name", "The domain name allowed before. Required."}}, filter.AllowAnswer{}},
	"POST /api/filter/lists/refresh": {"Downloads the lists with a url now (one with name, else all), as their refresh would: a failure keeps the last good copy. Answers when done, with each list's outcome; 404 for a name that is no list with a url.",
		[][2]string{{"name", "A list name; absent: every list with a url."}}, filter.RefreshAnswer{}},
	"GET /api/filter/block": {"The names blocked from the dashboard (each with the names below it).", nil, filter.AllowedAnswer{}},
	"POST /api/filter/block": {"Blocks a name and every name below it for every client, like a filter.block rule, kept in filter.state_dir across restarts; the dashboard's allow and a pause win over it.",
		[][2]string{{"name", "The domain name to block. Required."}}, filter.BlockAnswer{}},
	"POST /api/filter/block/remove": {"Ends a block from the dashboard.",
		[][2]string{{"name", "The domain name blocked before. Required."}}, filter.BlockAnswer{}},
	"GET /api/filter/services": {"The blocked-services catalogue built into the binary: its version, each service's id, name, source and domains, and how many queries it blocked; the safe-search engines.",
		nil, filter.ServicesAnswer{}},
	"GET /api/filter/groups": {"Each [[filter.groups]] group's switches: the services and safe-search engines in force, the configured ones, and the overrides set from the dashboard.",
		nil, []filter.GroupSwitches{}},
	"POST /api/filter/groups/switch": {"Turns one service, or one engine's safe search, on or off for a group over its configuration, or back to it; kept in filter.state_dir across restarts. 404 for an unknown group, service or engine.",
		[][2]string{{"group", "A [[filter.groups]] name. Required."}, {"service", "A catalogue id; or"}, {"safe_search", "an engine: google, bing, duckduckgo or youtube."}, {"state", "on, off, or config (back to the configuration). Required."}}, filter.SwitchAnswer{}},
}

// CacheFlushAnswer and CacheEntryAnswer are the cache's answers
// (internal/cache/api.go writes them as maps); the names here are only
// the schemas'.
type (
	CacheFlushAnswer struct {
		Flushed int `json:"flushed"`
	}
	CacheEntryAnswer struct {
		Entries []cache.Explanation `json:"entries"`
	}
)

// cacheDocs document the cache's routes (internal/cache, mounted by
// internal/app/cache.go). Its 400s are plain text, not JSON. The app's
// TestOpenAPI_documentsEveryServedAPIRoute checks that these, the
// dashboard's and the filter's are every /api route the binary serves.
var cacheDocs = map[string]struct {
	summary  string
	params   [][2]string
	body     any
	mutating bool
}{
	"POST /api/cache/flush": {"Removes the cached answers for a name and every name below it, or every entry without name.",
		[][2]string{{"name", "The domain name to flush (and the names below it); absent: every entry."}}, CacheFlushAnswer{}, true},
	"GET /api/peers/state": {"This node's replicated dashboard state (allowed names, pauses, group switches, acknowledged devices, dashboard NTAs) with each key's stamp, and its digest: what a [[peers]] peer pulls (docs/how-to/two-pis.md). 404 without [[peers]].",
		nil, peers.State{}, false},
	"GET /api/peers": {"Each [[peers]] peer: its last good pull, the last error, and whether its state equalled this node's then (in_sync). 404 without [[peers]].",
		nil, peers.StatusAnswer{}, false},
	"GET /api/cache/entry": {"The cached entries for a name (each type and DO/CD variant), explained: age, TTL after the clamps, origin, fresh or stale.",
		[][2]string{{"name", "The domain name. Required."}, {"type", "A DNS type (A, AAAA, MX, …); absent: every type."}}, CacheEntryAnswer{}, false},
}

// devicesDocs document the devices routes (internal/devices, mounted by
// internal/app/devices.go).
var devicesDocs = map[string]struct {
	summary  string
	params   [][2]string
	body     any
	mutating bool
}{
	"GET /api/devices": {"The devices seen (by MAC from the neighbour table or a trusted forwarder, or by ClientID), most recently seen first: name, MAC, the address last used, first and last seen, queries, and whether the device is new (seen for the first time and not yet acknowledged).",
		nil, devices.ListAnswer{}, false},
	"POST /api/devices/ack": {"Acknowledges a new device: it is no longer listed as new, and no longer filtered by devices.new_devices' group; kept in filter.state_dir across restarts. 404 when no such device has been seen.",
		[][2]string{{"client", "The device's key as GET /api/devices gives it (mac:aa:bb:cc:dd:ee:ff, id:NAME) or its MAC address. Required."}}, devices.AckAnswer{}, true},
}

// TestOpenAPI_matchesTheServedRoutesAndFields: docs/reference/openapi.json
// is exactly what the served routes (the dashboard's and the filter's),
// their parameters and the Go types of their answers say. `go test
// ./internal/dashboard -run OpenAPI -update` rewrites it after a change.
func TestOpenAPI_matchesTheServedRoutesAndFields(t *testing.T) {
	d := New(Deps{})
	routes := slices.Sorted(maps.Keys(d.apiRoutes()))
	if docs := slices.Sorted(maps.Keys(routeDocs)); !slices.Equal(routes, docs) {
		t.Fatalf("served API routes %v, documented %v", routes, docs)
	}
	if ps := slices.Sorted(maps.Keys(routeParams)); !slices.Equal(routes, ps) {
		t.Fatalf("routes with parameter lists %v, served %v", ps, routes)
	}
	e := filter.New(filter.Options{})
	defer e.Close()
	var served []string
	mutating := map[string]bool{}
	for _, r := range e.Routes(func() *filter.Stage { return nil }) {
		served = append(served, r.Pattern)
		mutating[r.Pattern] = r.Mutating
	}
	slices.Sort(served)
	if docs := slices.Sorted(maps.Keys(filterDocs)); !slices.Equal(served, docs) {
		t.Fatalf("served filter routes %v, documented %v", served, docs)
	}
	for r, doc := range cacheDocs {
		mutating[r] = doc.mutating
	}

	for r, doc := range devicesDocs {
		mutating[r] = doc.mutating
	}
	for r, doc := range layerDocs { // layer_openapi_test.go
		mutating[r] = doc.mutating
	}
	want := buildOpenAPI(t, routes, served, mutating)
	if *updateOpenAPI {
		if err := os.WriteFile(openapiFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the code serves; run go test ./internal/dashboard -run OpenAPI -update and review the diff", openapiFile)
	}
}

func buildOpenAPI(t *testing.T, routes, filterRoutes []string, mutating map[string]bool) []byte {
	paths := map[string]map[string]any{}
	add := func(r string, op map[string]any) {
		method, path, _ := strings.Cut(r, " ")
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	for _, r := range routes {
		var params []any
		for _, p := range routeParams[r] {
			desc, ok := paramDocs[p]
			if !ok {
				t.Fatalf("parameter %s of %s has no description", p, r)
			}
			params = append(params, map[string]any{"name": p, "in": "query", "required": false, "description": desc, "schema": map[string]any{"type": "string"}})
		}
		ok := map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(routeDocs[r].body))}}}
		if r == "GET /api/queries/export" {
			ok = map[string]any{"description": "OK: a stream, one row per line", "content": map[string]any{
				"application/x-ndjson": map[string]any{"schema": schemaOf(reflect.TypeOf(routeDocs[r].body))},
				"text/csv":             map[string]any{"schema": map[string]any{"type": "string"}},
			}}
		}
		op := map[string]any{
			"summary": routeDocs[r].summary,
			"responses": map[string]any{
				"200": ok,
				"400": map[string]any{"description": "A parameter is unknown, repeated, malformed or out of range; the body says which.", "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}},
				"401": map[string]any{"description": "web.password_file is set and the request has no session (log in at /login) and no API token; or its Authorization: Bearer token is unknown, revoked or expired."},
				"403": map[string]any{"description": "No password is set and web.listen is not a loopback address."},
			},
		}
		if params != nil {
			op["parameters"] = params
		}
		add(r, op)
	}
	type extDoc struct {
		summary, bad string
		params       [][2]string
		body         any
	}
	ext := map[string]extDoc{}
	for _, r := range filterRoutes {
		d := filterDocs[r]
		ext[r] = extDoc{d.summary, "A parameter is missing or malformed; the body says which.", d.params, d.body}
	}
	for r, d := range cacheDocs {
		ext[r] = extDoc{d.summary, "The name or type is not valid; the plain-text body says which.", d.params, d.body}
	}
	for r, d := range dnssecDocs {
		ext[r] = extDoc{summary: d.summary, bad: "A parameter is missing or malformed; the body says which.", body: d.body}
	}
	for r, d := range devicesDocs {
		ext[r] = extDoc{summary: d.summary, bad: "The client parameter is missing or names no device key or MAC; the body says so.", params: d.params, body: d.body}
	}
	for r, d := range layerDocs {
		ext[r] = extDoc{summary: d.summary, bad: "A parameter is missing, or the entry fails the configuration's validation; the body says which entry and why, and nothing changed.", params: d.params, body: d.body}
	}
	for _, r := range slices.Sorted(maps.Keys(ext)) {
		doc := ext[r]
		var params []any
		for _, p := range doc.params {
			params = append(params, map[string]any{"name": p[0], "in": "query", "required": strings.HasSuffix(p[1], "Required."), "description": p[1], "schema": map[string]any{"type": "string"}})
		}
		responses := map[string]any{
			"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(doc.body))}}},
			"400": map[string]any{"description": doc.bad, "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}},
			"401": map[string]any{"description": "web.password_file is set and the request has no session (log in at /login) and no API token; or its Authorization: Bearer token is unknown, revoked or expired."},
			"403": map[string]any{"description": "No password is set and web.listen is not a loopback address."},
		}
		if _, isCache := cacheDocs[r]; isCache {
			responses["400"] = map[string]any{"description": doc.bad, "content": map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}}
		}
		if mutating[r] {
			responses["403"] = map[string]any{"description": "No password is set and web.listen is not a loopback address; or a login exists and the X-CSRF-Token header is missing or wrong; or the request is cross-origin."}
		}
		if _, isLayer := layerDocs[r]; isLayer && mutating[r] {
			responses["409"] = map[string]any{"description": "No filter.state_dir, or the layer file cannot be read (edited by hand into invalid JSON): nothing changed; the body says why.", "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}}
		}
		if r == "POST /api/devices/ack" {
			responses["404"] = map[string]any{"description": "No device with that key has been seen (or it was forgotten).", "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}}
		}
		if r == "POST /api/filter/pause" || r == "POST /api/filter/resume" {
			responses["404"] = map[string]any{"description": "client is neither an IP address nor a [[clients]] name (nor one with a pause), or group is not a [[filter.groups]] name: it would pause nobody; the body says so.", "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}}
		}
		op := map[string]any{"summary": doc.summary, "responses": responses}
		if params != nil {
			op["parameters"] = params
		}
		add(r, op)
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":       "nxdns API: history, dashboard data, filter and cache",
			"version":     "1",
			"description": "Served on web.listen. With web.password_file set every route needs the session cookie of a login at /login (mutating routes also the X-CSRF-Token header) or an API token (Authorization: Bearer, nxdns token add; read for reading routes, control for mutating ones); without one they are served only on a loopback web.listen. Generated from internal/dashboard, internal/filter and internal/cache by the dashboard's OpenAPI test; internal/app's test checks that it lists every /api route the binary serves. /metrics and /api/health are described in docs/reference/http.md.",
		},
		"paths": paths,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

var errorSchema = map[string]any{"type": "object", "properties": map[string]any{"error": map[string]any{"type": "string"}}}

// schemaOf is the JSON schema of what encoding/json makes of t.
func schemaOf(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			props[name] = schemaOf(f.Type)
		}
		return map[string]any{"type": "object", "properties": props}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	}
	panic("openapi: no schema for " + t.String())
}

// TestOpenAPI_servedFieldsAreTheDocumentedOnes: a real answer of each
// route has exactly the documented top-level fields (omitempty ones may be
// absent), so a field the handler adds outside the types fails.
func TestOpenAPI_servedFieldsAreTheDocumentedOnes(t *testing.T) {
	base, _ := serve(t, 20)
	for r, doc := range routeDocs {
		if r == "GET /api/queries/export" {
			continue // a stream of rows, not one object: TestExport_* read it
		}
		_, path, _ := strings.Cut(r, " ")
		var got map[string]any
		getJSON(t, base+path, 200, &got)
		props := schemaOf(reflect.TypeOf(doc.body))["properties"].(map[string]any)
		for k := range got {
			if _, ok := props[k]; !ok {
				t.Errorf("%s serves %q, which the document lacks", r, k)
			}
		}
	}
}
